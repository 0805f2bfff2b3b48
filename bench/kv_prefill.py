"""Prefill attention over a bf16 vs int8 vs int4 KV cache: one layer, the last 2048-token chunk of a prompt of L
tokens (queries at L-2048 .. L-1 over keys 0 .. L-1, causal), at the Llama-3-8B shape (32 q / 8 kv heads of 128)
and the Qwen3.5-27B one (24 / 4 of 256), L = 8K and 32K. The quantised caches run ``kvq_prefill`` (sm_75+: flash
attention over the codes, each tile dequantised in shared memory; its forms by warps a block) and the dense pass
(``kvq_gather``: the used blocks dequantised into the query's dtype, then torch SDPA as on the bf16 path), same
process and pools (``NINFER_KVQ_PREFILL`` picks one: ninfer.kernels.kv_quant); the bf16 cache (torch SDPA alone, flash) is the peer. Each op
eagerly, median of 10 timed calls after 3 warm-ups (events), in ms; the fraction is of the bf16 matmul rate measured
in the same call for the attention's matrix FLOPs (causal QK^T and PV over the chunk: 2 x 2 x T x (L - T/2) x Hq x D);
"MB beyond" is the peak device memory a call allocates beyond its output.

    python bench/kv_prefill.py --backend sm90
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from decode import matmul_rate  # noqa: E402
from kv_attention import SHAPES, random_pool  # noqa: E402
from timing import event_median_s  # noqa: E402

from ninfer.kernels import kv_quant  # noqa: E402
from ninfer.ops import DeviceSpec, resolve  # noqa: E402

BS = 64


def ms(fn, *args, warm=3, reps=10) -> float:
    for _ in range(warm):
        fn(*args)
    return event_median_s(lambda: fn(*args), reps) * 1e3


def extra_mb(fn, *args) -> float:
    """Peak memory one call allocates beyond its output, MB."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = fn(*args)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before - out.numel() * out.element_size()) / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shapes", default="8b,27b")
    ap.add_argument("--ctx", default="8192,32768")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"), help="the queries' (fp16 for --backend sm75)")
    ap.add_argument("--opts", default="", help="'/'-separated extra compile options of the backend's library: the "
                    "quantised rows once per set, same process and pools (precompile: bench/precompile_variants.sh)")
    a = ap.parse_args()
    from ninfer.backends import installed_backends

    lib = installed_backends()[a.backend].kernels
    base_options = lib.options

    def use(opt: str):
        lib.set_options(base_options + tuple(opt.split()))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    flops = matmul_rate()
    print(f"{torch.cuda.get_device_name()}  bf16 matmul {flops / 1e12:.0f} TFLOP/s  torch {torch.__version__}")
    print("| shape | ctx | KV | dequantisation | ms | of bf16 matmul | vs bf16 cache | MB beyond |\n"
          "|---|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        Hq, Hk, D = SHAPES[shape]
        for L in (int(c) for c in a.ctx.split(",")):
            T = a.chunk
            nblk = L // BS
            table = torch.randperm(nblk, device="cuda", dtype=torch.int32)
            positions = torch.arange(L - T, L, device="cuda")
            q = torch.randn(T, Hq, D, device="cuda", dtype=dtype)
            fl = 2 * 2 * T * (L - T / 2) * Hq * D
            base = None
            for fmt in ("bf16", "int8", "int4"):
                kc, vc = random_pool(fmt, True, nblk, Hk, D), random_pool(fmt, False, nblk, Hk, D)
                if fmt == "bf16":  # the dense cache in the queries' dtype
                    kc, vc = kc.to(dtype), vc.to(dtype)
                ops = resolve(a.backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
                rows = [("none (peer, SDPA)", "fused", 0)]
                if fmt != "bf16":
                    big, small = kv_quant.prefill_warps(D)
                    rows = [(f"kvq_prefill, {w} warps{f' {o}' if o else ''}", "fused", w, o)
                            for o in a.opts.split("/") for w in (big, small)]
                    rows.append(("kvq_gather + SDPA", "gather", 0, ""))
                for label, mode, warps, *opt in rows:
                    use(opt[0] if opt else "")
                    kv_quant.PREFILL_MODE, kv_quant.PREFILL_WARPS = mode, warps
                    t = ms(ops.paged_attention, q, kc, vc, table, positions, D ** -0.5)
                    mb = extra_mb(ops.paged_attention, q, kc, vc, table, positions, D ** -0.5)
                    base = t if fmt == "bf16" else base
                    print(f"| {shape} | {L} | {fmt} | {label} | {t:.2f} | {fl / (t / 1e3) / flops:.2f} | "
                          f"{t / base:.2f} | {mb:.0f} |", flush=True)
                kv_quant.PREFILL_MODE, kv_quant.PREFILL_WARPS = "fused", 0
                del kc, vc
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
