"""The one-token decode GEMVs of the Llama-3-8B and Qwen3.5-27B shapes under each K split of
``ninfer.kernels.gemv.split_k`` (``NINFER_GEMV_SPLITK``: ``1`` the rule, ``0`` / ``2`` / ``4`` forced), bf16, in one
process on the same weights.

Each op is captured 20 times into one CUDA graph with its weights rotated over copies past the 60 MB L2, the graph
replayed (bench/timing.py: median replay / 20); figures are microseconds and the weights' bytes over that time as a
fraction of the copy bandwidth measured in the same process.

    python bench/gemv_split.py --rules 1,0,2,4
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode import copy_bandwidth  # noqa: E402
from timing import graph_us  # noqa: E402

from ninfer.backends import installed_backends  # noqa: E402
from ninfer.kernels import gemv  # noqa: E402
from ninfer.kernels.ops import make_ops  # noqa: E402

SHAPES = [  # (label, op, rows of W, K); the gate_up rows are [gate | up]
    ("llama qkv 6144x4096", "linear", 6144, 4096), ("llama o 4096x4096", "linear", 4096, 4096),
    ("llama gate_up+silu 28672x4096", "linear_silu_mul", 28672, 4096), ("llama down 4096x14336", "linear", 4096, 14336),
    ("27b gdn in_proj 16480x5120", "linear", 16480, 5120), ("27b gdn out 5120x6144", "linear", 5120, 6144),
    ("27b attn qkv 14336x5120", "linear", 14336, 5120), ("27b attn o 5120x6144", "linear", 5120, 6144),
    ("27b gate_up+silu 34816x5120", "linear_silu_mul", 34816, 5120), ("27b down 5120x17408", "linear", 5120, 17408),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--rules", default="1,0,2,4")
    a = ap.parse_args()
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    ops = make_ops(installed_backends()[a.backend].kernels)
    rules = a.rules.split(",")
    print(f"{'GEMV (1 token, bf16)':32s}" + "".join(f" {'split ' + r:>10s} {'us':>7s} {'of copy':>8s}" for r in rules))
    for label, op, N, K in SHAPES:
        nbytes = N * K * 2
        n = max(2, (160 * 2**20) // nbytes + 1)  # copies past L2
        Ws = [(torch.randn(N, K, device="cuda") * K ** -0.5).to(torch.bfloat16) for _ in range(n)]
        x = torch.randn(1, K, device="cuda").to(torch.bfloat16)
        line = f"{label:32s}"
        for r in rules:
            os.environ["NINFER_GEMV_SPLITK"] = r
            us = graph_us(lambda i, op=op, x=x, Ws=Ws, n=n: ops[op](x, Ws[i % n]))
            sk = gemv.split_k(N, K) if op == "linear" else 1  # the SwiGLU GEMV never splits
            line += f" {sk:10d} {us:7.2f} {nbytes / us * 1e6 / bw:8.3f}"
        print(line, flush=True)
        del Ws
    os.environ.pop("NINFER_GEMV_SPLITK", None)


if __name__ == "__main__":
    main()
