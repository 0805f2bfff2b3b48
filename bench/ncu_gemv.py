"""Decode GEMVs to profile with Nsight Compute (hardware counters): one-token bf16 GEMVs of the Qwen3.5-27B and
Llama-3-8B shapes and the quantised ones (int4 / int8 groupwise, group 128), each launched eagerly a few times
after a warm-up, nothing else on the GPU. Run under ncu, e.g.

    ncu --clock-control none -k regex:'gemv|qmma|qmsk' --launch-skip 7 --launch-count 7 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats python bench/ncu_gemv.py

NCU_EXTRA="-DQMV_PERSIST=1 ...": the quantised GEMVs from that bench build of the quant library (bench/quant.py's
variants); NCU_QUANT_ONLY=1: those alone (3 warm-up launches, then one of each: --launch-skip 3 --launch-count 3);
NCU_FIXED=1: each int4 one also in fixed point, qmv1f and the bench kernel qmvi8 (bench/qmv_i8.py).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quant import random_quant  # noqa: E402

from ninfer.backends import installed_backends  # noqa: E402
from ninfer.kernels.ops import make_ops  # noqa: E402
from ninfer.quant import gpu  # noqa: E402

BF16 = [("linear", 16480, 5120), ("linear", 5120, 17408), ("linear", 4096, 4096), ("linear_silu_mul", 34816, 5120)]
QUANT = [(4, 34816, 5120), (4, 5120, 17408), (8, 28672, 4096)]


def fixed_calls(w, x):
    """NCU_FIXED=1: qmv1f (opt-in in the engine) on the token with its fixed-point form attached, and the bench
    kernel bench/kernels/qmv_i8.cu (build NCU_I8_BUILD, default -DI8_MAXREG=80) on the same weight and form."""
    import qmv_i8

    from ninfer.quant import fixed

    gpu.QMV1F = True
    xq, xg = fixed.fixed_point(x.flatten())
    xf = fixed.attach(x.clone(), xq, xg)
    n, k = w.scales.shape[0], w.in_features
    tiles = -(-n // 16)
    plan = gpu.qmv_warps(gpu._module(x.device)[gpu.qmv_kernel_name(x.dtype, torch.float16, 4, False)], tiles, k, 4,
                         x.device)
    kern = qmv_i8.module(x.device, os.environ.get("NCU_I8_BUILD", "-DI8_MAXREG=80"))["qmvi8_bf16_sf16_b4_sym"]
    y = torch.empty(1, n, dtype=torch.bfloat16, device=x.device)
    sp = gpu.tile_params(w)[0]
    return [(f"int4 {n}x{k} qmv1f", lambda: gpu.quant_linear(xf, w)),
            (f"int4 {n}x{k} qmvi8 (bench)", lambda: kern((tiles,), (plan * 32,), w.qweight, sp, xq, xg, y, n, k))]


def main():
    ops = make_ops(installed_backends()["sm90"].kernels)
    calls = []
    gpu.BENCH_EXTRA = tuple(os.environ.get("NCU_EXTRA", "").split())
    for op, n, k in ([] if os.environ.get("NCU_QUANT_ONLY") else BF16):
        W = (torch.randn(n, k, device="cuda") * k ** -0.5).to(torch.bfloat16)
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        calls.append((f"bf16 {op} {n}x{k}", lambda W=W, x=x, op=op: ops[op](x, W)))
    for bits, n, k in QUANT:
        w = gpu.prepare(random_quant(n, k, bits))
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        calls.append((f"int{bits} {n}x{k}", lambda w=w, x=x: gpu.quant_linear(x, w)))
        if os.environ.get("NCU_FIXED") and bits == 4:  # the same GEMV in fixed point: qmv1f, and the bench kernel
            calls += fixed_calls(w, x)
    for _, f in calls:  # warm-up: compiles, allocator (7 launches: ncu skips them)
        f()
    torch.cuda.synchronize()
    for label, f in calls:  # profiled: one launch of each, in this order
        print(label, flush=True)
        f()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
