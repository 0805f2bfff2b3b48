"""``ninfer quantize``: any checkpoint ninfer reads -> a compressed-tensors ``pack-quantized`` directory.

Every 2-D weight inside ``model.layers`` is quantised groupwise (RTN, or GPTQ with calibration
text); embeddings, norms and ``lm_head`` stay dense (``ignore``). Tensors stream one at a time from
the source's memory map into safetensors shards, so the model is never in memory twice.

Each group's scale (and zero point) is the smallest that clips nothing, so the extreme that binds it
lands on a code exactly (:func:`group_params`), not by the min-max observer's ``absmax / 7.5``, which moves every
group's largest weight, when positive, by half a step (7.5 rounds to code 8, clamped to 7).
On SmolLM2-135M that clipping alone was most of the int4 loss (bench/RESULTS.md). ``--method clip`` clips
deliberately instead: each group's scale searched for the least rounding error weighted by its input channels'
activation energy on calibration text (:func:`search_group_params`). ``--method round`` starts there and tunes
each decoder block's rounding and group scales against the float block's output (:mod:`.blockwise`): the int4
closest to the float model measured there, same checkpoint format.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ..errors import NinferError
from ..weights import open_checkpoint
from .layout import QuantWeight, group_for, pack_codes

SHARD_BYTES = 2 * 2**30
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                    "chat_template.jinja", "vocab.json", "merges.txt", "tokenizer.model")


def group_params(w: torch.Tensor, bits: int, symmetric: bool, dtype: torch.dtype
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale (``dtype``) and unsigned integer zero point (float) of each group w [..., g], clipping nothing.

    Symmetric (zero point 2**(bits-1), codes -2**(bits-1) .. 2**(bits-1)-1 around it): the smallest
    scale covering both signs, so the binding extreme lands exactly on -8 or +7 (int4).
    Asymmetric: over every integer zero point z, the smallest scale whose grid [-z s, (qmax - z) s]
    covers [min, max] (0 stays representable); the binding end lands exactly on a code.
    """
    qmax, mid = (1 << bits) - 1, 1 << (bits - 1)
    lo, hi = w.amin(-1).clamp(max=0).float(), w.amax(-1).clamp(min=0).float()
    if symmetric:
        s = torch.maximum(-lo / mid, hi / (mid - 1))
        z = torch.full_like(s, float(mid))
    else:
        zs = torch.arange(qmax + 1, dtype=torch.float32, device=w.device)  # candidate zero points
        inf = torch.tensor(float("inf"), device=w.device)
        need_hi = torch.where(zs < qmax, hi[..., None] / (qmax - zs).clamp(min=1), torch.where(hi[..., None] > 0, inf, 0))
        need_lo = torch.where(zs > 0, -lo[..., None] / zs.clamp(min=1), torch.where(lo[..., None] < 0, inf, 0))
        s, zi = torch.maximum(need_hi, need_lo).min(-1)
        z = zi.float()
    s = s.to(dtype)
    return torch.where(s == 0, torch.finfo(dtype).eps, s), z


def search_group_params(w: torch.Tensor, bits: int, symmetric: bool, dtype: torch.dtype,
                        importance: torch.Tensor | None = None, ratios: int = 16, min_ratio: float = 0.55,
                        refine: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`group_params`, but the scale (and zero point) that minimise each group's squared
    rounding error sum_k importance_k (w_k - w_hat_k)^2 instead of clipping nothing.

    Candidates: the no-clip scale shrunk by ``ratios`` steps down to ``min_ratio`` (symmetric), or the
    no-clip range shrunk the same way with the three integer zero points nearest its centre (asymmetric);
    then ``refine`` least-squares steps (the codes fixed: the error-minimising scale, rounded to ``dtype``,
    kept only where it lowers the error). ``importance``: [g] or broadcastable to ``w`` (e.g. the mean
    square of each input channel's activation); None weighs all equally. The scale is searched in its
    stored precision, so the error is that of the weights written.
    """
    qmax = (1 << bits) - 1
    w = w.float()
    imp = torch.ones_like(w) if importance is None else importance.float().expand_as(w)
    s0, z0 = group_params(w, bits, symmetric, dtype)

    def err_of(s, z):
        sf = s.float()[..., None]
        u = torch.clamp(torch.round(w / sf) + z[..., None], 0, qmax)
        return ((w - (u - z[..., None]) * sf).square() * imp).sum(-1), u

    def rounded(s):
        s = s.to(dtype)
        return torch.where(s == 0, torch.finfo(dtype).eps, s)

    best_s, best_z = s0, z0
    best_e, _ = err_of(s0, z0)
    lo, hi = w.amin(-1).clamp(max=0), w.amax(-1).clamp(min=0)
    for r in torch.linspace(1.0, min_ratio, ratios + 1).tolist()[1:]:
        if symmetric:
            cands = [(rounded(s0.float() * r), z0)]
        else:
            s = rounded((hi - lo) * r / qmax)
            zc = torch.round(-lo * r / s.float())
            cands = [(s, torch.clamp(zc + d, 0, qmax)) for d in (-1.0, 0.0, 1.0)]
        for s, z in cands:
            e, _ = err_of(s, z)
            better = e < best_e
            best_e, best_s, best_z = torch.where(better, e, best_e), torch.where(better, s, best_s), \
                torch.where(better, z, best_z)
    for _ in range(refine):  # least squares on the scale, codes and zero point fixed
        _, u = err_of(best_s, best_z)
        c = u - best_z[..., None]
        den = (imp * c.square()).sum(-1)
        s = rounded(torch.where(den > 0, (imp * w * c).sum(-1) / den.clamp(min=1e-30), best_s.float()).clamp(min=0))
        e, _ = err_of(s, best_z)
        better = e < best_e
        best_e, best_s = torch.where(better, e, best_e), torch.where(better, s, best_s)
    return best_s, best_z


def quantize_groups(weight: torch.Tensor, bits: int, group_size: int, symmetric: bool = True,
                    scale_dtype: torch.dtype = torch.bfloat16, clip_search: bool = False,
                    importance: torch.Tensor | None = None) -> QuantWeight:
    """Round-to-nearest groupwise quantisation with :func:`group_params` (what ``ninfer quantize`` writes),
    or with :func:`search_group_params` (``clip_search``; ``importance`` [K] weighs each input channel)."""
    n, k = weight.shape
    if k % group_size:
        raise NinferError(f"Input size {k} is not a multiple of the group size {group_size}; pick a group size "
                          "that divides every layer's input size (e.g. 32).")
    w = weight.float().view(n, k // group_size, group_size)  # [N, G, g]
    if clip_search:
        imp = None if importance is None else importance.float().view(1, k // group_size, group_size)
        s, z = search_group_params(w, bits, symmetric, scale_dtype, imp)
    else:
        s, z = group_params(w, bits, symmetric, scale_dtype)
    codes = torch.clamp(torch.round(w / s.float().unsqueeze(-1)) + z.unsqueeze(-1), 0, (1 << bits) - 1)
    return QuantWeight(pack_codes(codes.view(n, k), bits), s, bits, group_size, k,
                       zeros=None if symmetric else z.to(torch.uint8))


def ct_tensors(module: str, q: QuantWeight, shape: tuple[int, int]) -> dict[str, torch.Tensor]:
    """compressed-tensors tensors of one Linear: codes (already offset by 2**(bits-1)) packed from bit 0
    of little-endian int32 words, so our packed bytes are the words' bytes."""
    n, k = shape
    out = {f"{module}.weight_packed": q.qweight.contiguous().view(torch.int32),  # [N, K*bits/32]
           f"{module}.weight_scale": q.scales.contiguous(),  # [N, G]
           f"{module}.weight_shape": torch.tensor([n, k], dtype=torch.int64)}
    if q.zeros is not None:  # packed along N (compressed-tensors' packed_dim=0), zero-padded to whole words
        per_word = 32 // q.bits
        z = q.zeros.t().to(torch.uint8)  # [G, N]
        pad = (-n) % per_word
        z = torch.nn.functional.pad(z, (0, pad))
        out[f"{module}.weight_zero_point"] = pack_codes(z, q.bits).view(torch.int32).t().contiguous()
    return out


def quant_config(bits: int, symmetric: bool, groups: dict[int, list[str]], ignore: list[str]) -> dict:
    """One config group per group size, each targeting its modules by name (a model whose input
    sizes are not all multiples of --group-size gets the largest group that divides them)."""
    def weights(g):
        return {"num_bits": bits, "type": "int", "symmetric": symmetric, "strategy": "group", "group_size": g,
                "dynamic": False, "actorder": None, "observer": "minmax", "block_structure": None,
                "observer_kwargs": {}}
    config_groups = {
        f"group_{i}": {"targets": (["Linear"] if len(groups) == 1 else sorted(mods)), "weights": weights(g),
                       "format": "pack-quantized", "input_activations": None, "output_activations": None}
        for i, (g, mods) in enumerate(sorted(groups.items(), reverse=True))}
    return {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
        "config_groups": config_groups, "ignore": ignore, "kv_cache_scheme": None,
        "global_compression_ratio": None, "sparsity_config": {}, "transform_config": {}, "version": "0.20.1",
    }


# where a checkpoint keeps its decoder blocks: causal-LM layouts, and the multimodal one Qwen3.5 / 3.6 publish
# (the language model under model.language_model; the vision tower and the MTP head stay dense)
_BLOCK_PREFIXES = ("model.layers.", "model.language_model.layers.")


def _is_target(name: str, shape: tuple[int, ...]) -> bool:
    return name.startswith(_BLOCK_PREFIXES) and name.endswith(".weight") and len(shape) == 2


def _other_linear(name: str, shape: tuple[int, ...]) -> bool:
    """A Linear outside the decoder blocks (vision tower, MTP head), which stays dense; embeddings are not Linear."""
    return name.endswith(".weight") and len(shape) == 2 and "embed" not in name and name != "lm_head.weight"


class _ShardWriter:
    def __init__(self, dst: str):
        self.dst, self.shards, self.current, self.size = dst, [], {}, 0

    def add(self, tensors: dict[str, torch.Tensor]) -> None:
        for name, t in tensors.items():
            self.current[name] = t.contiguous()
            self.size += t.numel() * t.element_size()
        if self.size >= SHARD_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.current:
            self.shards.append(self.current)
            fn = f"model-{len(self.shards):05d}.safetensors.tmp"
            save_file(self.current, os.path.join(self.dst, fn), metadata={"format": "pt"})
            self.shards[-1] = list(self.current)
            self.current, self.size = {}, 0

    def finish(self) -> None:
        self.flush()
        total, weight_map = len(self.shards), {}
        for i, names in enumerate(self.shards, 1):
            fn = "model.safetensors" if total == 1 else f"model-{i:05d}-of-{total:05d}.safetensors"
            os.replace(os.path.join(self.dst, f"model-{i:05d}.safetensors.tmp"), os.path.join(self.dst, fn))
            weight_map.update({n: fn for n in names})
        if total > 1:
            with open(os.path.join(self.dst, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


def quantize_checkpoint(src: str, dst: str, bits: int = 4, group_size: int = 128, method: str = "rtn",
                        symmetric: bool = True, dtype: torch.dtype = torch.bfloat16, calibration=None,
                        progress: bool = True, round_options: dict | None = None,
                        tune_options: dict | None = None) -> dict:
    """Write ``dst``; returns the ``quantization_config`` written. ``calibration``: text or token ids for
    GPTQ and for ``clip`` (round to nearest with each group's scale and zero point chosen to minimise its
    rounding error weighted by the mean square of each input channel's activation, :func:`search_group_params`)
    and for ``round`` (block-wise learned rounding and clipping, :func:`.blockwise.learned_rounding`, with
    ``round_options``). ``tune_options`` with "steps" > 0: then the group scales and the RMSNorm weights are tuned
    end to end on the calibration text (:func:`.tune.tune_scales_and_norms`, these options), the codes kept."""
    if bits not in (4, 8):
        raise NinferError(f"--bits must be 4 or 8, got {bits}.")
    if group_size not in (32, 64, 128):
        raise NinferError(f"--group-size must be 32, 64 or 128, got {group_size}.")
    if method not in ("rtn", "gptq", "clip", "round"):
        raise NinferError(f"--method must be rtn, gptq, clip or round, got {method!r}.")
    tune = tune_options if tune_options and tune_options.get("steps") else None
    if tune and calibration is None:
        raise NinferError("Tuning (--tune-steps) needs --calibration FILE (a few thousand tokens of typical text).")
    if os.path.exists(dst) and not os.path.isdir(dst):
        raise NinferError(f"{dst} exists and is not a directory; pass a new directory.")
    if os.path.exists(dst) and os.listdir(dst):
        raise NinferError(f"{dst} exists and is not empty; pass a new directory.")
    ckpt = open_checkpoint(src)
    targets = [n for n in ckpt.tensor_names() if _is_target(n, tuple(ckpt.tensor_shape(n)))]
    if not any(group_for(ckpt.tensor_shape(n)[1], group_size) for n in targets):
        raise NinferError(f"{src} has no decoder-block Linear weight whose input size is a multiple of 16 "
                          "(looked under model.layers and model.language_model.layers); nothing to quantise.")
    created = not os.path.exists(dst)
    try:
        os.makedirs(dst, exist_ok=True)
        with open(os.path.join(dst, ".ninfer-write-test"), "w"):
            pass
        os.remove(os.path.join(dst, ".ninfer-write-test"))
    except OSError as e:
        raise NinferError(f"Cannot write to {dst} ({e.strerror}); pass a directory you can write to.") from None
    try:
        return _quantize_into(ckpt, src, dst, bits, group_size, method, symmetric, dtype, calibration, progress,
                              round_options, tune)
    except BaseException:  # an error or Ctrl-C: leave no half-written checkpoint that a rerun would refuse
        if created:
            shutil.rmtree(dst, ignore_errors=True)
        else:
            for fn in os.listdir(dst):
                full = os.path.join(dst, fn)
                shutil.rmtree(full, ignore_errors=True) if os.path.isdir(full) else os.remove(full)
        raise


def _quantize_into(ckpt, src, dst, bits, group_size, method, symmetric, dtype, calibration, progress,
                   round_options, tune) -> dict:
    hessians = importance = learned = None
    dense: dict = {}
    if method == "round" or tune:
        from .blockwise import checkpoint_weights

        learned, dense = checkpoint_weights(src, calibration, bits, group_size, dtype, progress, method=method,
                                            symmetric=symmetric, tune=tune,
                                            **((round_options or {}) if method == "round" else {}))
    elif method in ("gptq", "clip"):
        from .gptq_solve import collect_hessians

        stats = collect_hessians(src, calibration, progress, diag_only=method == "clip")
        hessians, importance = (stats, None) if method == "gptq" else (None, stats)
    names = ckpt.tensor_names()
    ignore, groups = ["lm_head"], {}
    writer = _ShardWriter(dst)
    bar = tqdm(names, desc=f"quantizing to int{bits} g{group_size}", unit="tensor", file=sys.stderr,
               disable=None if progress else True)
    for name in bar:
        shape = tuple(ckpt.tensor_shape(name))
        w = ckpt.get(name)
        g = group_for(shape[1], group_size) if _is_target(name, shape) else None
        if g is not None:
            module = name[: -len(".weight")]
            if learned is not None:
                q = learned[name]
            elif hessians is not None:
                from .gptq_solve import gptq_quantize

                q = gptq_quantize(w, hessians[name], bits, g, symmetric, dtype)
            elif importance is not None:
                q = quantize_groups(w, bits, g, symmetric, dtype, clip_search=True, importance=importance[name])
            else:
                q = quantize_groups(w, bits, g, symmetric, scale_dtype=dtype)
            writer.add(ct_tensors(module, q, shape))
            groups.setdefault(g, []).append(module)
        else:
            if _is_target(name, shape) or _other_linear(name, shape):  # dense Linears: named, so readers of
                ignore.append(name[: -len(".weight")])                 # the "Linear" target keep them so
            w = dense.get(name, w)  # a tuned norm weight
            writer.add({name: w.to(dtype) if w.is_floating_point() else w})
        del w
    bar.close()
    writer.finish()
    qcfg = quant_config(bits, symmetric, groups, ignore)
    _write_config(ckpt, src, dst, qcfg, dtype)
    return qcfg


def _write_config(ckpt, src: str, dst: str, qcfg: dict, dtype: torch.dtype) -> None:
    cfg = dict(getattr(ckpt, "raw_config", None) or ckpt.config)
    cfg["quantization_config"] = qcfg
    cfg["torch_dtype"] = str(dtype).replace("torch.", "")
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if os.path.isdir(src):
        for fn in _TOKENIZER_FILES:
            if os.path.exists(os.path.join(src, fn)):
                shutil.copy(os.path.join(src, fn), os.path.join(dst, fn))
        return
    tok = ckpt.tokenizer()  # GGUF: its embedded tokenizer as tokenizer.json + tokenizer_config.json
    tok._hf.save(os.path.join(dst, "tokenizer.json"))
    st = ckpt.special_tokens()
    tcfg = {"bos_token": st.get("bos_token"), "eos_token": st.get("eos_token"),
            "add_bos_token": bool(getattr(tok, "add_bos_token", False)), "tokenizer_class": "PreTrainedTokenizerFast"}
    if ckpt.chat_template:
        tcfg["chat_template"] = ckpt.chat_template
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    gen = {"bos_token_id": ckpt.config.get("bos_token_id"), "eos_token_id": ckpt.config.get("eos_token_id")}
    with open(os.path.join(dst, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
