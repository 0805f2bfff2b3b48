"""Per-op decode times of the fused kernels against the unfused launches they replace, and the decode
GEMV's split-K choice per shape, at Llama-3-8B / Qwen3-8B shapes (bf16, batch 1).

Each op is captured 20 times into one CUDA graph (inputs rotated over copies past the 60 MB L2 where
they are weights) and the graph replayed; the time is the median replay over 20, divided by 20, in us.

    python bench/fused_ops.py --backend sm90
"""

from __future__ import annotations

import argparse
import os

import torch
from timing import graph_us

from ninfer.backends import installed_backends
from ninfer.kernels.ops import make_ops
from ninfer.reference import ops as ref


def launchers(backend: str, fused: bool, splitk: str = "1"):
    os.environ["NINFER_FUSED"] = "add_rms_norm,rope_write_kv,linear_silu_mul,attention_merge" if fused else "0"
    os.environ["NINFER_GEMV_SPLITK"] = splitk
    return make_ops(installed_backends()[backend].kernels)


def rnd(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)


def op_rows(backend: str):
    H, I, Hq, Hk, D, ctx = 4096, 14336, 32, 8, 128, 512
    x, r, w = rnd(1, H), rnd(1, H), rnd(H, scale=0.5)
    W = [rnd(2 * I, H, scale=H ** -0.5) for _ in range(2)]  # 235 MB each: past L2
    cos_sin = ref.rope_cos_sin(4096, D, 5e5, device="cuda")
    qkv = rnd(1, (Hq + 2 * Hk) * D)
    q, k, v = (t.view(1, -1, D) for t in qkv.split([Hq * D, Hk * D, Hk * D], dim=-1))
    qn, kn = rnd(D, scale=0.5), rnd(D, scale=0.5)
    bs, nblk = 16, (ctx + 192) // 16
    kc, vc = rnd(nblk, bs, Hk, D), rnd(nblk, bs, Hk, D)
    bt = torch.arange(nblk, device="cuda", dtype=torch.int32)
    pos, slots = torch.tensor([ctx - 1], device="cuda"), torch.tensor([ctx - 1], device="cuda")
    qa = rnd(1, Hq, D)
    rows = []
    for fused in (False, True):
        o = launchers(backend, fused)
        rows.append(("add_rms_norm 4096", fused, graph_us(lambda i, o=o: o["add_rms_norm"](x, r, w, 1e-5))))
        rows.append(("rope_write_kv (llama)", fused, graph_us(
            lambda i, o=o: o["rope_write_kv"](q, k, v, pos, cos_sin, kc, vc, slots))))
        rows.append(("rope_write_kv (qk norm)", fused, graph_us(
            lambda i, o=o: o["rope_write_kv"](q, k, v, pos, cos_sin, kc, vc, slots, qn, kn, 1e-6))))
        rows.append(("gate_up+silu 28672x4096", fused, graph_us(lambda i, o=o: o["linear_silu_mul"](x, W[i % 2]))))
        rows.append((f"attention ctx {ctx}", fused, graph_us(
            lambda i, o=o: o["paged_attention"](qa, kc, vc, bt, pos, D ** -0.5))))
    return rows


def splitk_rows(backend: str):
    rows = []
    for N, K in ((6144, 4096), (4096, 4096), (4096, 14336), (14336, 5120), (16384, 5120), (5120, 6144),
                 (5120, 17408)):
        n_copies = max(2, (120 * 2**20) // (N * K * 2) + 1)  # rotate past L2
        Ws = [rnd(N, K, scale=K ** -0.5) for _ in range(n_copies)]
        x = rnd(1, K)
        for sk in ("0", "2", "4"):
            o = launchers(backend, True, sk)
            us = graph_us(lambda i, o=o, x=x, Ws=Ws, n=n_copies: o["linear"](x, Ws[i % n]))
            rows.append((f"gemv {N}x{K} splitk={sk if sk != '0' else 1}", N * K * 2 / us / 1e3, us))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    a = ap.parse_args()
    ops = op_rows(a.backend)
    print(f"{'op (8B decode shape)':28s} {'unfused us':>11s} {'fused us':>9s}")
    for name in dict.fromkeys(n for n, _, _ in ops):
        t = {f: us for n, f, us in ops if n == name}
        print(f"{name:28s} {t[False]:11.2f} {t[True]:9.2f}")
    for name, gbs, us in splitk_rows(a.backend):
        print(f"{name:34s} {us:8.2f} us {gbs:7.0f} GB/s")
    os.environ.pop("NINFER_GEMV_SPLITK", None)
    os.environ.pop("NINFER_FUSED", None)


if __name__ == "__main__":
    main()
