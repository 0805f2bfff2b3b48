"""Weight quantisation methods on a loaded model, for measuring them against each other
(bench/int4_accuracy.py, tests/test_quant_accuracy.py): each returns [(Linear, QuantWeight)] for every
Linear of the decoder layers (lm_head stays dense, as ``ninfer quantize`` writes it).
"""

from __future__ import annotations

import os

import torch

from ..layers.linear import Linear
from .gptq_solve import gptq_quantize, linear_input_hessians
from .layout import group_for
from .load import _target
from .quantize import quantize_groups


def decoder_linears(llm) -> list[tuple[str, Linear]]:
    """(parameter path, Linear) of every Linear inside the decoder layers, in forward order."""
    out = []
    for path in llm.model.weight_sources():
        obj, attr = _target(llm.model, path)
        if isinstance(obj, Linear) and attr == "weight" and path.startswith("layers."):
            out.append((path, obj))
    return out


class CalibrationCache:
    """One-shot input Gram matrices (mean x x^T per Linear) of the unquantised model, cached on disk."""

    def __init__(self, file: str | None = None, window: int | None = None, sink_weight: float = 1.0):
        self.file, self.window, self.sink_weight, self.h = file, window, sink_weight, None

    def hessians(self, llm, ids: list[int]) -> dict[str, torch.Tensor]:
        if self.h is None:
            if self.file and os.path.exists(self.file):
                self.h = torch.load(self.file)
            else:
                self.h = {p: h.cpu() for p, h in linear_input_hessians(llm, ids, self.window,
                                                                       sink_weight=self.sink_weight).items()}
                if self.file:
                    torch.save(self.h, self.file)
        return self.h


def rtn(llm, bits=4, group_size=128, symmetric=True, clip_search=False, importance=None, scale_dtype=torch.bfloat16):
    new = []
    for path, lin in decoder_linears(llm):
        g = group_for(lin.in_features, group_size)
        imp = None if importance is None else torch.diag(importance[path])
        new.append((lin, quantize_groups(lin.weight.cpu(), bits, g, symmetric, scale_dtype, clip_search, imp)))
    return new


def gptq(llm, hessians, bits=4, group_size=128, symmetric=True, scale_dtype=torch.bfloat16, **kw):
    new = []
    for path, lin in decoder_linears(llm):
        g = group_for(lin.in_features, group_size)
        new.append((lin, gptq_quantize(lin.weight.cpu(), hessians[path], bits, g, symmetric, scale_dtype, **kw)))
    return new


def awq(llm, hessians, bits=4, group_size=128, symmetric=True, scale_dtype=torch.bfloat16, solver="rtn",
        clip_search=False, report=None, **kw):
    """AWQ scales folded (:mod:`.awq`), then each Linear quantised by RTN or GPTQ (its Hessian rescaled).
    Returns [(Linear or RMSNorm, new weight)]: the norms' weights change too."""
    from .awq import awq_scales

    new, scales = awq_scales(llm, hessians, bits, group_size, symmetric, scale_dtype, report)
    out = [(obj, w) for obj, w in new.items() if not isinstance(obj, Linear)]
    for path, lin in decoder_linears(llm):
        W, s = new.get(lin, lin.weight.float().cpu()), scales.get(path)
        H = hessians[path] if s is None else hessians[path] / (s[:, None] * s[None, :])
        g = group_for(lin.in_features, group_size)
        if solver == "gptq":
            q = gptq_quantize(W, H, bits, g, symmetric, scale_dtype, clip_search=clip_search, **kw)
        else:
            q = quantize_groups(W, bits, g, symmetric, scale_dtype, clip_search, torch.diag(H) if clip_search else None)
        out.append((lin, q))
    return out


def _bench():
    def h(llm, calib, stats):
        return stats.hessians(llm, calib)
    m = {
        "rtn int8 sym": lambda llm, c, s: rtn(llm, bits=8),
        "rtn sym": lambda llm, c, s: rtn(llm),
        "rtn asym": lambda llm, c, s: rtn(llm, symmetric=False),
        "rtn+clip sym (mse)": lambda llm, c, s: rtn(llm, clip_search=True),
        "rtn+clip asym (mse)": lambda llm, c, s: rtn(llm, symmetric=False, clip_search=True),
        "rtn+clip sym (act-weighted)": lambda llm, c, s: rtn(llm, clip_search=True, importance=h(llm, c, s)),
        "rtn+clip asym (act-weighted)": lambda llm, c, s: rtn(llm, symmetric=False, clip_search=True,
                                                              importance=h(llm, c, s)),
    }
    for sym in (True, False):
        t = "sym" if sym else "asym"
        for name, kw in (("gptq", {}), ("gptq act", {"act_order": True, "static_groups": True}),
                         ("gptq+clip", {"clip_search": True}),
                         ("gptq act+clip", {"act_order": True, "static_groups": True, "clip_search": True})):
            m[f"{name} {t}"] = (lambda llm, c, s, kw=kw, sym=sym: gptq(llm, h(llm, c, s), symmetric=sym, **kw))
    for sym in (True, False):
        t = "sym" if sym else "asym"
        m[f"awq {t}"] = lambda llm, c, s, sym=sym: awq(llm, h(llm, c, s), symmetric=sym)
        m[f"awq+clip {t}"] = lambda llm, c, s, sym=sym: awq(llm, h(llm, c, s), symmetric=sym, clip_search=True)
        m[f"awq+gptq {t}"] = lambda llm, c, s, sym=sym: awq(llm, h(llm, c, s), symmetric=sym, solver="gptq")
        m[f"awq+gptq act+clip {t}"] = lambda llm, c, s, sym=sym: awq(
            llm, h(llm, c, s), symmetric=sym, solver="gptq", clip_search=True, act_order=True, static_groups=True)
    def learned(llm, c, s, **kw):
        import ast

        from .blockwise import learned_rounding
        kw.update(ast.literal_eval(os.environ.get("ROUND_KW", "{}")))
        if isinstance(kw.get("e2e_calibration"), str):  # a text file for the end-to-end stage
            with open(kw["e2e_calibration"], encoding="utf-8") as f:
                kw["e2e_calibration"] = llm.tokenizer.encode(f.read())
        return learned_rounding(llm, c, **kw)
    m["round"] = learned  # block-wise learned rounding + clipping (ROUND_KW: a dict of learned_rounding options)

    def e2e(llm, c, s):
        import ast

        from .blockwise import e2e_tune
        saved = torch.load(os.environ["E2E_FROM"], weights_only=False)  # {parameter path: QuantWeight}
        weights = [(lin, saved[path]) for path, lin in decoder_linears(llm)]
        return e2e_tune(llm, weights, c, **ast.literal_eval(os.environ.get("E2E_KW", "{}")))
    def clip_tune(llm, c, s, symmetric=True):
        import ast

        from .evaluate import clip_quantized
        from .tune import tune_scales_and_norms
        kw = ast.literal_eval(os.environ.get("TUNE_KW", "{}"))
        new = clip_quantized(llm, c[:2048], 4, 128, symmetric)
        tuned, norms = tune_scales_and_norms(llm, new, c, **kw)
        return tuned + norms
    m["clip+tune sym"] = clip_tune  # clip, then scales and norms tuned end to end (TUNE_KW: options)
    m["clip+tune asym"] = lambda llm, c, s: clip_tune(llm, c, s, symmetric=False)
    m["e2e"] = e2e  # the end-to-end stage alone, on weights saved by SAVE= (E2E_FROM: the file; E2E_KW: options)
    return m


BENCH_METHODS = _bench()
