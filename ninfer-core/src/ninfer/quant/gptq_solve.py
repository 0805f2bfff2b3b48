"""GPTQ (Frantar et al., 2022): quantise a weight column by column, pushing each column's rounding
error onto the columns not yet quantised through the inverse Hessian of the layer's inputs.

Calibration here is one-shot and non-sequential: every Linear's input Gram matrix H = X^T X is
collected in one forward of the unquantised model over the calibration text (the inputs do not
see earlier layers' quantisation). Fine for the small models ninfer quantises on a CPU; H is
[K, K] float32 per Linear, so big models need a GPU and memory to match.
"""

from __future__ import annotations

import dataclasses

import torch

from .layout import QuantWeight, pack_codes
from .quantize import group_params, search_group_params


@torch.inference_mode()
def linear_input_hessians(llm, ids: list[int], window: int | None = None, diag_only: bool = False,
                          sink_weight: float = 1.0) -> dict[str, torch.Tensor]:
    """Our Linear parameter path -> H [K, K] float32: mean x x^T of its inputs over one forward of ``ids``
    (in consecutive windows of ``window`` tokens, default the model's context length, each from an empty
    cache: every window's first tokens are attention sinks, as a prompt's are). ``diag_only``: only its
    diagonal [K], the mean square of each input channel. ``sink_weight``: each window's first token (the
    attention sink) counts that many times in the sum (a measurement, bench/int4_accuracy.py)."""
    from ..layers.linear import Linear
    from .load import _target

    owner: dict[int, str] = {}  # id(weight tensor) -> parameter path
    for path in llm.model.weight_sources():
        obj, attr = _target(llm.model, path)
        if isinstance(obj, Linear) and attr == "weight":
            owner[id(obj.weight)] = path
    sums: dict[str, torch.Tensor] = {}
    at_window_start = [False]

    def record(x, w):
        path = owner.get(id(w))
        if path is not None:
            xf = x.reshape(-1, x.shape[-1]).float()
            if sink_weight != 1.0 and at_window_start[0]:
                xf = torch.cat([xf[:1] * sink_weight ** 0.5, xf[1:]])
            sums[path] = sums.get(path, 0) + (xf.square().sum(0) if diag_only else xf.t() @ xf)  # [K] / [K, K]

    saved = {}
    for op in ("linear", "linear_silu_mul"):  # every op that multiplies by a Linear's weight
        impl = llm.ops.impls.get(op)
        if impl is not None:
            saved[op] = impl
            llm.ops.impls[op] = dataclasses.replace(impl, fn=lambda x, w, *a, _fn=impl.fn: (record(x, w), _fn(x, w, *a))[1])
    try:
        window = min(window or llm.max_context, llm.max_context)  # consecutive windows, each from an empty cache
        for w0 in range(0, len(ids), window):
            llm.runner.reset()
            for i in range(w0, min(w0 + window, len(ids)), 512):
                at_window_start[0] = i == w0
                llm.runner.forward(ids[i: min(i + 512, w0 + window, len(ids))], "prefill")
    finally:
        llm.ops.impls.update(saved)
        llm.runner.reset()
    return {path: h / len(ids) for path, h in sums.items()}


def collect_hessians(src: str, calibration: str | list[int], progress: bool = True, max_tokens: int = 2048,
                     diag_only: bool = False) -> dict[str, torch.Tensor]:
    """Checkpoint tensor name -> H (or its diagonal) for every Linear of the model at ``src`` (loaded
    unquantised on the CPU)."""
    from ..llm import LLM
    from ..models import ARCHITECTURES

    llm = LLM(model=src, backend="reference", device="cpu", dtype=torch.float32, progress=progress,
              max_context=max_tokens + 1, quantized_weights=False)
    ids = llm.tokenizer.encode(calibration) if isinstance(calibration, str) else list(calibration)
    per_path = linear_input_hessians(llm, ids[:max_tokens], diag_only=diag_only)
    arch = ARCHITECTURES[llm.config.architecture]
    names = set(llm.checkpoint.tensor_names())
    out = {}
    for path, canon in llm.model.weight_sources().items():
        if path in per_path:
            for c in canon:  # fused parts (q|k|v, gate|up) share their input, so their H
                out[next((n for n in arch.names(c) if n in names), c)] = per_path[path]
    return out


def gptq_quantize(weight: torch.Tensor, H: torch.Tensor, bits: int, group_size: int, symmetric: bool = True,
                  scale_dtype: torch.dtype = torch.float16, block: int = 128, damp: float = 0.01,
                  act_order: bool = False, static_groups: bool = False, clip_search: bool = False) -> QuantWeight:
    """GPTQ of ``weight`` [N, K] for inputs with Gram matrix ``H`` [K, K] (any positive multiple of X^T X).

    As the reference (Frantar et al., ``gptq.py``): dead inputs zeroed, ``damp`` x mean(diag H) added to the
    diagonal, the upper Cholesky factor of H^-1, columns quantised one by one in blocks of ``block`` with each
    column's error pushed onto the columns not yet quantised (lazily across blocks). A group's scale and zero
    point are chosen when its first column comes up, from the weights as updated by then, clipping nothing
    (:func:`group_params`) or error-minimising (``clip_search``: :func:`search_group_params` weighted by
    diag H). ``act_order``: columns in order of decreasing diag H; groups then follow that order (the weight
    gets ``perm``, a checkpoint ``g_idx``) unless ``static_groups``: every group's parameters chosen first,
    from the original weights, groups kept contiguous in checkpoint order (compressed-tensors' actorder
    "weight"), so the written weight is a plain grouped one.
    """
    W = weight.float().clone()  # [N, K]
    n, k = W.shape
    qmax = (1 << bits) - 1
    H = H.float().clone()
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    imp = torch.diag(H).clone()  # input channel importance for the clip search

    def params(w, cols):
        if clip_search:
            return search_group_params(w, bits, symmetric, scale_dtype, imp[cols])
        return group_params(w, bits, symmetric, scale_dtype)

    G = k // group_size
    scales = torch.zeros(n, G, dtype=scale_dtype)
    zeros = torch.zeros(n, G)
    if static_groups:
        for g in range(G):
            cols = slice(g * group_size, (g + 1) * group_size)
            scales[:, g], zeros[:, g] = params(W[:, cols], cols)
    perm = torch.argsort(torch.diag(H), descending=True) if act_order else torch.arange(k)
    W, H = W[:, perm], H[perm][:, perm]
    H += damp * torch.diag(H).mean() * torch.eye(k)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)  # [K, K]
    codes = torch.zeros(n, k, dtype=torch.uint8)  # in processing order
    block = max(block // group_size, 1) * group_size  # groups never straddle blocks
    for i1 in range(0, k, block):
        i2 = min(i1 + block, k)
        W1, Err1, Hinv1 = W[:, i1:i2].clone(), torch.zeros(n, i2 - i1), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            if static_groups:
                g = int(perm[col]) // group_size
                sf, z = scales[:, g].float(), zeros[:, g]
            elif col % group_size == 0:
                g = col // group_size
                s, z = params(W1[:, i: i + group_size], perm[col: col + group_size])
                scales[:, g], zeros[:, g] = s, z
                sf = s.float()
            u = torch.clamp(torch.round(W1[:, i] / sf) + z, 0, qmax)
            codes[:, col] = u.to(torch.uint8)
            err = (W1[:, i] - (u - z) * sf) / Hinv1[i, i]
            W1[:, i:] -= err[:, None] * Hinv1[i, i:][None, :]
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    zq = None if symmetric else zeros.to(torch.uint8)
    if static_groups or not act_order:  # codes back in checkpoint column order: a plain grouped weight
        out = torch.empty_like(codes)
        out[:, perm] = codes
        return QuantWeight(pack_codes(out, bits), scales, bits, group_size, k, zeros=zq)
    return QuantWeight(pack_codes(codes, bits), scales, bits, group_size, k, zeros=zq, perm=perm)
