"""Prefill attention over a bf16 vs int8 vs int4 KV cache: one layer, the last 2048-token chunk of a prompt of L
tokens (queries at L-2048 .. L-1 over keys 0 .. L-1, causal), at the Llama-3-8B shape (32 q / 8 kv heads of 128)
and the Qwen3.5-27B one (24 / 4 of 256), L = 8K and 32K. The quantised caches' blocks are dequantised into the
query's dtype, then torch SDPA runs as on the bf16 path: by ``kvq_gather`` (one launch a pool, the default) and by
``kv_ops._gather``'s torch ops (before), same process and pools; the bf16 cache (SDPA alone) is the peer, with
its K and V read per KV head (enable_gqa, the default) and repeated to the query heads first (before). Each op
eagerly, median of 10 timed calls after 3 warm-ups (events), in ms; the fraction is of the bf16 matmul rate measured
in the same call for the attention's matrix FLOPs (causal QK^T and PV over the chunk: 2 x 2 x T x (L - T/2) x Hq x D).

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

from ninfer.kernels.attention import prefill_sdpa  # noqa: E402
from ninfer.ops import DeviceSpec, resolve  # noqa: E402
from ninfer.quant import kv_ops  # noqa: E402
from ninfer.quant.kv_cache import rotate  # noqa: E402

BS = 64


def ms(fn, *args, warm=3, reps=10) -> float:
    for _ in range(warm):
        fn(*args)
    return event_median_s(lambda: fn(*args), reps) * 1e3


def before(q, kc, vc, table, positions, scale):
    """The quantised prefill as it was: the used blocks through kv_ops._gather's torch ops, then SDPA."""
    nblk = (int(positions[-1].item()) + BS) // BS
    blocks = table[:nblk].long()
    k = kv_ops._gather(kc, blocks).to(q.dtype)
    v = kv_ops._gather(vc, blocks).to(q.dtype)
    qr = rotate(q.float()).to(q.dtype) if kc.rotate else q
    local = torch.arange(nblk, dtype=torch.int32, device=q.device)
    o = prefill_sdpa(qr, k, v, local, positions, scale)
    return rotate(o.float()).to(q.dtype) if vc.rotate else o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shapes", default="8b,27b")
    ap.add_argument("--ctx", default="8192,32768")
    ap.add_argument("--chunk", type=int, default=2048)
    a = ap.parse_args()
    flops = matmul_rate()
    print(f"{torch.cuda.get_device_name()}  bf16 matmul {flops / 1e12:.0f} TFLOP/s  torch {torch.__version__}")
    print("| shape | ctx | KV | dequantisation | ms | of bf16 matmul | vs bf16 cache |\n|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        Hq, Hk, D = SHAPES[shape]
        for L in (int(c) for c in a.ctx.split(",")):
            T = a.chunk
            nblk = L // BS
            table = torch.randperm(nblk, device="cuda", dtype=torch.int32)
            positions = torch.arange(L - T, L, device="cuda")
            q = torch.randn(T, Hq, D, device="cuda", dtype=torch.bfloat16)
            fl = 2 * 2 * T * (L - T / 2) * Hq * D
            base = None
            for fmt in ("bf16", "int8", "int4"):
                kc, vc = random_pool(fmt, True, nblk, Hk, D), random_pool(fmt, False, nblk, Hk, D)
                ops = resolve(a.backend, DeviceSpec.of(torch.device("cuda"), torch.bfloat16), kv_format=fmt)
                rows = [("kvq_gather kernel" if fmt != "bf16" else "none (peer)", ops.paged_attention, None)]
                if fmt != "bf16":
                    rows.append(("torch ops (before)", before, None))
                else:  # the bf16 path as before this session: K and V repeated to the query heads for SDPA
                    rows.append(("none, K/V repeated to the q heads (before)", ops.paged_attention, "repeat"))
                for label, fn, gqa in rows:
                    if gqa:
                        os.environ["NINFER_PREFILL_GQA"] = gqa
                    t = ms(fn, q, kc, vc, table, positions, D ** -0.5)
                    os.environ.pop("NINFER_PREFILL_GQA", None)
                    base = t if fmt == "bf16" and gqa is None else base
                    print(f"| {shape} | {L} | {fmt} | {label} | {t:.2f} | {fl / (t / 1e3) / flops:.2f} | "
                          f"{t / base:.2f} |", flush=True)
                del kc, vc
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
