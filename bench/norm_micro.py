"""The RMSNorm kernels alone, one-pass (held in registers) vs the former two-pass ones (NINFER_NORM_TWO_PASS):
microseconds per call of add_rms_norm / rms_norm / rms_norm_gated at decode shapes, 200 back-to-back calls
replayed from one CUDA graph (PDL on: what decode's graphs do; off: kernel plus launch gap).

    python bench/norm_micro.py --backend sm90
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from timing import graph_us  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    a = ap.parse_args()
    from ninfer.backends import installed_backends
    from ninfer.kernels import launch
    from ninfer.kernels.ops import make_ops

    lib = installed_backends()[a.backend].kernels
    base = lib.options
    dt = torch.bfloat16
    x = {H: torch.randn(1, H, device="cuda").to(dt) for H in (4096, 5120)}
    r = {H: torch.randn(1, H, device="cuda").to(dt) for H in (4096, 5120)}
    w = {H: torch.randn(H, device="cuda").to(dt) for H in (4096, 5120, 128)}
    xg, zg = torch.randn(48, 128, device="cuda").to(dt), torch.randn(48, 128, device="cuda").to(dt)
    print(f"{'kernel':34s} {'pdl':>3s} {'two-pass us':>11s} {'one-pass us':>11s}")
    for pdl in (True, False):
        launch.PDL = pdl
        res = {}

        def per_call_us(fn):  # 200 back-to-back calls in one graph, median of 5 replays
            return graph_us(lambda _i: fn(), inner=200, reps=5, drop=0)

        for variant, opts in (("two", base + ("-DNINFER_NORM_TWO_PASS",)), ("one", base)):
            lib.options = opts
            lib._modules.clear()
            ops = make_ops(lib)
            for H in (5120, 4096):
                res[(f"add_rms_norm 1x{H}", variant)] = per_call_us(
                    lambda H=H, ops=ops: ops["add_rms_norm"](x[H], r[H], w[H], 1e-6, H == 5120))
                res[(f"rms_norm 1x{H}", variant)] = per_call_us(lambda H=H, ops=ops: ops["rms_norm"](x[H], w[H], 1e-6))
            res[("rms_norm_gated 48x128", variant)] = per_call_us(
                lambda ops=ops: ops["rms_norm_gated"](xg, zg, w[128], 1e-6))
        for name in dict.fromkeys(k for k, _ in res):
            print(f"{name:34s} {int(pdl):3d} {res[(name, 'two')]:11.2f} {res[(name, 'one')]:11.2f}", flush=True)
    lib.options = base
    lib._modules.clear()


if __name__ == "__main__":
    main()
