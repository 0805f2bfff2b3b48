"""GEMV variants (rows per block, loads in flight, L2 prefetch hint) on the decode shapes of an 8B and a
27B model, against cuBLAS, in GB/s of weights read; and a profile of one eager decode step by kernel.

    python bench/gemv_tune.py [--profile qwen3-8b]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPES = [(6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288), (151936, 4096), (34816, 5120), (5120, 17408)]
VARIANTS = [(4, 8, 1), (4, 16, 1), (8, 8, 1), (2, 8, 1), (4, 4, 1), (4, 8, 0), (8, 16, 1)]


def variant_library(warps: int, unroll: int, hint: int):
    from ninfer.kernels.library import KernelLibrary

    src = (("#define NINFER_L2_PREFETCH_256B\n" if hint else "") + f"#define NINFER_GEMV_WARPS {warps}\n"
           f"#define NINFER_GEMV_UNROLL {unroll}\n#include <ninfer/kernels.cuh>\n"
           "NINFER_KERNELS(bf16, __nv_bfloat16)\nNINFER_COMMON_KERNELS()\n")
    d = Path(tempfile.mkdtemp())
    (d / "kernels.cu").write_text(src)
    return KernelLibrary(f"w{warps}u{unroll}h{hint}", d / "kernels.cu", (torch.bfloat16,), ("sm_90",))


def time_fn(fn, n=30):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(n):
        fn(i)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / n


def _rate(fn, x, Ws, nbytes) -> float:
    return nbytes / time_fn(lambda i=0: fn(x, Ws[i % len(Ws)])) / 1e9


def tune():
    from ninfer.kernels.ops import make_ops

    libs = {f"w{v[0]}u{v[1]}h{v[2]}": make_ops(variant_library(*v))["linear"] for v in VARIANTS}
    for N, K in SHAPES:
        copies = max(2, (512 * 2**20) // (N * K * 2) + 1)  # rotate weights past the 60 MB L2
        Ws = [torch.randn(N, K, device="cuda").to(torch.bfloat16) for _ in range(copies)]
        x = torch.randn(1, K, device="cuda").to(torch.bfloat16)
        res = {"cublas": _rate(F.linear, x, Ws, N * K * 2)}
        for name, lin in libs.items():
            assert torch.allclose(lin(x, Ws[0]).float(), F.linear(x, Ws[0]).float(), rtol=2e-2, atol=2e-2)
            res[name] = _rate(lin, x, Ws, N * K * 2)
        print(f"GEMV GB/s {N}x{K}", " ".join(f"{k}={v:.0f}" for k, v in res.items()), flush=True)


def profile(shape: str, backend: str):
    import random_model as rm
    from torch.profiler import ProfilerActivity, profile

    runner, _ = rm.build(shape, backend, "cuda", torch.bfloat16, 1024)
    runner.graphs = None
    prompt = list(range(1, 513))
    for phase in ("prefill", "decode"):
        runner.reset()
        runner.prefill(prompt)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            if phase == "prefill":
                runner.reset()
                runner.prefill(prompt)
            else:
                for t in range(5):
                    runner.decode(t + 7)
            torch.cuda.synchronize()
        print(f"PROFILE {shape} {phase}")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="qwen3-8b")
    ap.add_argument("--backend", default="sm90")
    a = ap.parse_args()
    tune()
    if a.profile:
        profile(a.profile, a.backend)
