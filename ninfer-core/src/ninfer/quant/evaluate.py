"""Accuracy of quantisation choices on one loaded model: swap the KV format or quantise the
weights in memory, measure, restore. ``ninfer eval ppl`` uses it to print one table per load.
"""

from __future__ import annotations

import contextlib

import torch

from ..kv.paged import PagedKVCache, SequenceKV
from ..layers.linear import Linear
from ..ops import resolve
from .layout import group_for
from .quantize import quantize_groups


@contextlib.contextmanager
def kv_format(llm, fmt: str):
    """Run ``llm`` with a fresh KV cache in ``fmt`` (its write_kv / attention ops swapped with it)."""
    runner, ops = llm.runner, llm.ops
    saved = (runner.kv, runner.seq, dict(ops.impls))
    cache = runner.kv
    kv = PagedKVCache(len(cache.k), cache.num_blocks, cache.block_size, llm.config.num_kv_heads,
                      llm.config.head_dim, llm.dtype, llm.device, fmt)
    ops.impls.update({op: impl for op, impl in resolve(ops.backend, ops.spec, kv_format=fmt).impls.items()
                      if op in ("write_kv", "paged_attention")})
    runner.reset()
    runner.kv, runner.seq = kv, SequenceKV(kv, llm.max_context, llm.device)
    try:
        yield llm
    finally:
        runner.reset()
        runner.kv, runner.seq = saved[0], saved[1]
        ops.impls.clear()
        ops.impls.update(saved[2])


def _linears(obj, seen=None):
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Linear):
        yield obj
        return
    for name, child in getattr(obj, "__dict__", {}).items():
        if name in ("ops", "cfg"):
            continue
        for c in (child if isinstance(child, list) else [child]):
            if hasattr(c, "__dict__") and not isinstance(c, (type, torch.Tensor)):
                yield from _linears(c, seen)


@contextlib.contextmanager
def gptq_weights(llm, calibration_ids: list[int], bits: int, group_size: int, symmetric: bool = True,
                 scale_dtype: torch.dtype = torch.bfloat16):
    """Like :func:`rtn_weights` with GPTQ, calibrated on one forward of ``calibration_ids``."""
    from .gptq_solve import gptq_quantize, linear_input_hessians
    from .load import _target

    hessians = linear_input_hessians(llm, calibration_ids)
    new = []
    for path, h in hessians.items():
        lin, _ = _target(llm.model, path)
        g = group_for(lin.in_features, group_size)
        if lin is llm.model.lm_head or g is None:
            continue
        new.append((lin, gptq_quantize(lin.weight.cpu(), h.cpu(), bits, g, symmetric, scale_dtype).to(lin.weight.device)))
    with _swapped(llm, new):
        yield llm


def clip_quantized(llm, calibration_ids: list[int], bits: int, group_size: int, symmetric: bool = True,
                   scale_dtype: torch.dtype = torch.bfloat16) -> list:
    """[(Linear, QuantWeight)] of ``ninfer quantize --method clip`` for every Linear but lm_head: each group's
    scale (and zero point) searched for the least rounding error weighted by its input channels' mean square
    activation on ``calibration_ids``."""
    from .gptq_solve import linear_input_hessians
    from .load import _target

    importance = linear_input_hessians(llm, calibration_ids, diag_only=True)
    new = []
    for path, imp in importance.items():
        lin, _ = _target(llm.model, path)
        g = group_for(lin.in_features, group_size)
        if lin is llm.model.lm_head or g is None:
            continue
        q = quantize_groups(lin.weight.cpu(), bits, g, symmetric, scale_dtype, clip_search=True, importance=imp.cpu())
        new.append((lin, q.to(lin.weight.device)))
    return new


@contextlib.contextmanager
def clip_weights(llm, calibration_ids: list[int], bits: int, group_size: int, symmetric: bool = True,
                 scale_dtype: torch.dtype = torch.bfloat16):
    """Like :func:`rtn_weights` with ``ninfer quantize --method clip`` (:func:`clip_quantized`)."""
    with _swapped(llm, clip_quantized(llm, calibration_ids, bits, group_size, symmetric, scale_dtype)):
        yield llm


@contextlib.contextmanager
def clip_tuned_weights(llm, calibration_ids: list[int], bits: int, group_size: int, symmetric: bool = True,
                       scale_dtype: torch.dtype = torch.bfloat16, **options):
    """Like :func:`clip_weights`, then the group scales and RMSNorm weights tuned end to end
    (:func:`.tune.tune_scales_and_norms`, ``options`` passed on; ``ninfer quantize --method clip --tune-steps``);
    yields ``llm`` with the tuned Linears and norms in place. The clip search sees the first 2048 tokens of
    ``calibration_ids``, as ``ninfer quantize`` does."""
    from .tune import tune_scales_and_norms

    new = clip_quantized(llm, calibration_ids[:2048], bits, group_size, symmetric, scale_dtype)  # as the CLI
    tuned, norms = tune_scales_and_norms(llm, [(lin, q.to("cpu")) for lin, q in new], calibration_ids, **options)
    with _swapped(llm, [(lin, q.to(lin.weight.device)) for lin, q in tuned] + norms):
        yield llm


@contextlib.contextmanager
def round_weights(llm, calibration_ids: list[int], bits: int, group_size: int,
                  scale_dtype: torch.dtype = torch.bfloat16, **options):
    """Like :func:`rtn_weights` with ``ninfer quantize --method round``: block-wise learned rounding and group
    scales (:func:`.blockwise.learned_rounding`, ``options`` passed on) on ``calibration_ids``."""
    from .blockwise import learned_rounding

    new = learned_rounding(llm, calibration_ids, bits, group_size, scale_dtype, **options)
    with _swapped(llm, [(lin, q.to(lin.weight.device)) for lin, q in new]):
        yield llm


@contextlib.contextmanager
def _swapped(llm, new: list):
    """Run ``llm`` with each (Linear, weight) of ``new`` in place of its weight; restored after."""
    saved = [(lin, lin.weight) for lin, _ in new]
    for lin, w in new:
        lin.weight = w
    llm.runner.reset()
    try:
        yield llm
    finally:
        for lin, w in saved:
            lin.weight = w
        llm.runner.reset()


@contextlib.contextmanager
def rtn_weights(llm, bits: int, group_size: int, symmetric: bool = True, include_lm_head: bool = False,
                scale_dtype: torch.dtype = torch.bfloat16):
    """Run ``llm`` with every dense Linear (lm_head only if asked, as ``ninfer quantize`` does)
    quantised round-to-nearest to the grouped-int layout, exactly as ``ninfer quantize`` would
    (rows quantise independently, so fused q|k|v equals the separate projections)."""
    new = []
    for lin in _linears(llm.model):
        if lin is llm.model.lm_head and not include_lm_head:
            continue
        g = group_for(lin.in_features, group_size)
        if hasattr(lin.weight, "dim") and g is not None:
            new.append((lin, quantize_groups(lin.weight, bits, g, symmetric, scale_dtype).to(lin.weight.device)))
    with _swapped(llm, new):
        yield llm


@contextlib.contextmanager
def lm_head_quantized(llm, fmt: str):
    """Run ``llm`` with its lm_head quantised as ``LLM(quantize_lm_head=fmt)`` does ("int8" | "int4"); restored
    after."""
    from .load import quantize_lm_head

    lin = llm.model.lm_head
    dense = lin.weight
    quantize_lm_head(llm.model, fmt)
    new, lin.weight = lin.weight, dense
    with _swapped(llm, [(lin, new)]):
        yield llm
