"""Activation-aware per-input-channel scaling (AWQ, Lin et al. 2023), folded so the checkpoint stays plain.

For a Linear y = x W^T whose input x comes out of a per-channel op (an RMSNorm's weight, or another
Linear's output rows), scaling W's input column c by s_c and that op's channel c by 1 / s_c leaves the
model unchanged in exact arithmetic, but moves rounding error away from the channels with large
activations. s = a^alpha with a_c the RMS of input channel c on calibration text (normalised to
geometric mean 1 over its extremes), alpha in [0, 1) picked per Linear to minimise the layer-output error
tr(E H E^T), E = W - Q(W diag s) diag(1/s), H = mean x x^T. Pairs folded (Llama-style decoders):
input_norm -> q|k|v, post_norm -> gate|up, v rows -> o columns (with grouped-query attention one scale
per KV channel, shared by the query heads that read it), up rows -> down columns. Everything stays a
dense norm weight or a grouped-int Linear, so any compressed-tensors reader runs the result.
"""

from __future__ import annotations

import torch

from .layout import dequantize, group_for
from .quantize import quantize_groups


def output_error(W: torch.Tensor, Wq: torch.Tensor, H: torch.Tensor) -> float:
    E = (W - Wq).float()
    return float(((E @ H.float()) * E).sum(dtype=torch.float64))


def search_scale(W: torch.Tensor, H: torch.Tensor, bits: int, group_size: int, symmetric: bool,
                 scale_dtype: torch.dtype, tie: torch.Tensor | None = None, grid: int = 20
                 ) -> tuple[torch.Tensor, float, float]:
    """(s [K], alpha, error ratio vs alpha=0) minimising the output error of quantising W diag(s).
    ``tie`` [K] long: channels with the same tie id get the same scale (mean of their statistic)."""
    a = torch.diag(H).clamp(min=0).sqrt().float()  # RMS of each input channel
    if tie is not None:
        a = torch.zeros(int(tie.max()) + 1).index_add_(0, tie, a) / torch.bincount(tie).float()
        a = a[tie]
    a = a.clamp(min=1e-4 * float(a.max()))
    best = (torch.ones_like(a), 0.0, None)
    base = None
    for i in range(grid):
        alpha = i / grid
        s = a.pow(alpha)
        s = s / (s.max() * s.min()).sqrt()
        Wq = dequantize(quantize_groups(W * s, bits, group_size, symmetric, scale_dtype)) / s
        err = output_error(W, Wq, H)
        base = err if base is None else base
        if best[2] is None or err < best[2]:
            best = (s, alpha, err)
    return best[0], best[1], best[2] / base


def awq_scales(llm, hessians: dict[str, torch.Tensor], bits: int = 4, group_size: int = 128,
               symmetric: bool = True, scale_dtype: torch.dtype = torch.bfloat16, report=None):
    """The folded model: ({Linear or RMSNorm: new weight}, {Linear path: input scale s [K]}).
    The new Linear weights are dense (scaled); quantise them afterwards (RTN or GPTQ with the Hessian
    transformed by the scale: H' = H / (s s^T), since the Linear's input becomes x / s)."""
    cfg = llm.config
    new, scales = {}, {}

    def weight(obj):
        return new.get(obj, obj.weight).float().cpu()

    for i, layer in enumerate(llm.model.layers):
        attn, mlp = layer.mixer, layer.mlp
        p = f"layers.{i}"
        # input_norm -> q|k|v
        qkv = f"{p}.mixer.qkv.weight"
        W = weight(attn.qkv)
        s, alpha, r = search_scale(W, hessians[qkv], bits, group_for(W.shape[1], group_size), symmetric, scale_dtype)
        new[attn.qkv], new[layer.input_norm] = W * s, weight(layer.input_norm) / s
        scales[qkv] = s
        # v rows -> o columns
        o = f"{p}.mixer.o.weight"
        hq, hk, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        tie = ((torch.arange(hq) // (hq // hk))[:, None] * d + torch.arange(d)[None, :]).reshape(-1)  # [hq*d]
        Wo = weight(attn.o)
        so, alpha_o, r_o = search_scale(Wo, hessians[o], bits, group_for(Wo.shape[1], group_size), symmetric,
                                        scale_dtype, tie=tie)
        sv = torch.zeros(hk * d).index_copy_(0, tie, so)  # the one scale of each KV channel
        Wqkv = new[attn.qkv].clone()
        Wqkv[hq * d + hk * d:] /= sv[:, None]
        new[attn.qkv], new[attn.o] = Wqkv, Wo * so
        scales[o] = so
        # post_norm -> gate|up
        gu = f"{p}.mlp.gate_up.weight"
        W = weight(mlp.gate_up)
        s, alpha_g, r_g = search_scale(W, hessians[gu], bits, group_for(W.shape[1], group_size), symmetric,
                                       scale_dtype)
        new[mlp.gate_up], new[layer.post_norm] = W * s, weight(layer.post_norm) / s
        scales[gu] = s
        # up rows -> down columns
        dn = f"{p}.mlp.down.weight"
        Wd = weight(mlp.down)
        sd, alpha_d, r_d = search_scale(Wd, hessians[dn], bits, group_for(Wd.shape[1], group_size), symmetric,
                                        scale_dtype)
        inter = Wd.shape[1]
        Wgu = new[mlp.gate_up].clone()
        Wgu[inter:] /= sd[:, None]
        new[mlp.gate_up], new[mlp.down] = Wgu, Wd * sd
        scales[dn] = sd
        if report:
            report(f"layer {i}: alpha qkv {alpha:.2f} ({r:.2f}) o {alpha_o:.2f} ({r_o:.2f}) "
                   f"gate_up {alpha_g:.2f} ({r_g:.2f}) down {alpha_d:.2f} ({r_d:.2f})")
    return new, scales
