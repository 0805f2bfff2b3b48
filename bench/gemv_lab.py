"""Sweep of one-token bf16 GEMV structures (bench/gemv_lab.cu) on the decode shapes of Llama-3-8B and
Qwen3.5-27B, beside the backend's own kernels (the split-K rule; the SwiGLU GEMV for gate_up) and cuBLAS, in one
process on the same weights. Question: which structure streams each shape nearest the copy bandwidth.

Each op is captured 20 times into one CUDA graph with its weights rotated over copies past the 60 MB L2 (PDL
launches, as the backend's), replayed (bench/timing.py: median replay / 20). Figures: fraction of the copy
bandwidth measured in the same process. Every variant's output is checked against a float32 x @ W^T first.

    python bench/gemv_lab.py [--variants r1_u4_s1_w4_st0_pre0,...] [--shapes 27b]
    python bench/gemv_lab.py --compile-only sm_90    # here, without a GPU: fills NINFER_KERNEL_CACHE
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (R rows a warp, U loads a row in flight, SPLIT warps a row, WARPS a block, STRIDED rows, PRE loads before the wait)
VARIANTS = [  # (R, U, SPLIT, WARPS, STRIDED, PRE, M): see gemv_lab.cu
    (1, 4, 1, 4, 0, 0, 0), (1, 4, 2, 4, 0, 0, 0), (1, 4, 4, 4, 0, 0, 0),   # the backend's kernels, re-built here
    (1, 4, 1, 4, 0, 0, 2), (1, 4, 2, 4, 0, 0, 2), (1, 4, 4, 4, 0, 0, 2),   # + the next round in flight
    (1, 2, 1, 4, 0, 0, 2), (1, 2, 2, 4, 0, 0, 2), (1, 2, 4, 4, 0, 0, 2), (1, 4, 4, 8, 0, 0, 2),
    (1, 4, 1, 4, 0, 1, 2), (1, 4, 4, 4, 0, 1, 2), (1, 4, 4, 4, 0, 1, 0),   # + first round before the wait
    (2, 2, 1, 4, 1, 0, 0), (2, 2, 1, 4, 0, 0, 0), (2, 4, 1, 4, 0, 0, 0), (2, 2, 2, 4, 0, 0, 0), (2, 2, 4, 8, 0, 0, 0),
    (2, 2, 1, 4, 0, 0, 2), (2, 2, 2, 4, 0, 0, 2), (2, 2, 4, 8, 0, 0, 2),
    (4, 2, 1, 4, 0, 0, 0), (4, 1, 1, 4, 0, 0, 2), (4, 2, 2, 8, 0, 0, 0),
    (1, 8, 1, 4, 0, 0, 0), (1, 8, 4, 4, 0, 0, 0), (1, 4, 1, 4, 0, 0, 3), (1, 4, 4, 4, 0, 0, 3),
]

VARIANTS2 = [  # the second sweep: loads before the wait (PRE) with every split, rows a warp and ring form
    (1, 4, 4, 4, 0, 0, 0), (1, 4, 2, 4, 0, 0, 0), (2, 2, 2, 4, 0, 0, 2),   # call 1's, for the spread between calls
    (1, 4, 1, 4, 0, 1, 0), (1, 4, 2, 4, 0, 1, 0), (1, 4, 4, 4, 0, 1, 0),
    (1, 4, 1, 4, 0, 1, 2), (1, 4, 2, 4, 0, 1, 2), (1, 4, 4, 4, 0, 1, 2),
    (1, 2, 1, 4, 0, 1, 2), (1, 2, 2, 4, 0, 1, 2), (1, 2, 4, 4, 0, 1, 2),
    (2, 2, 1, 4, 0, 1, 0), (2, 2, 2, 4, 0, 1, 0), (2, 2, 4, 8, 0, 1, 0),
    (2, 2, 1, 4, 0, 1, 2), (2, 2, 2, 4, 0, 1, 2), (2, 2, 4, 8, 0, 1, 2),
    (1, 8, 2, 4, 0, 1, 0), (1, 8, 4, 4, 0, 1, 0), (2, 4, 2, 4, 0, 1, 0),
    (1, 4, 2, 8, 0, 1, 0), (1, 4, 4, 8, 0, 1, 0), (1, 4, 1, 8, 0, 1, 0),
]

SHAPES = [  # (label, rows of W, K, the backend op that serves it)
    ("llama qkv 6144x4096", 6144, 4096, "linear"), ("llama o 4096x4096", 4096, 4096, "linear"),
    ("llama gate_up 28672x4096", 28672, 4096, "linear_silu_mul"), ("llama down 4096x14336", 4096, 14336, "linear"),
    ("27b gdn in_proj 16480x5120", 16480, 5120, "linear"), ("27b out/o 5120x6144", 5120, 6144, "linear"),
    ("27b attn qkv 14336x5120", 14336, 5120, "linear"), ("27b gate_up 34816x5120", 34816, 5120, "linear_silu_mul"),
    ("27b down 5120x17408", 5120, 17408, "linear"),
]


def name(v) -> str:
    return "lab_r{}_u{}_s{}_w{}_st{}_pre{}_m{}".format(*v)


def source(variants) -> str:
    return (HERE / "gemv_lab.cu").read_text() + "".join("LAB({}, {}, {}, {}, {}, {}, {})\n".format(*v) for v in variants)


def parse(s: str):
    out = []
    for tok in s.split(","):
        out.append(tuple(int(re.sub(r"\D", "", x)) for x in tok.strip().removeprefix("lab_").split("_")))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=None, help="comma list of names (r2_u2_s1_w4_st0_pre0, ...)")
    ap.add_argument("--shapes", default="", help="substring filter on the shape labels")
    ap.add_argument("--compile-only", default=None, metavar="ARCH")
    ap.add_argument("--set", default="1", help="variant set: 1 (VARIANTS) or 2 (VARIANTS2)")
    ap.add_argument("--gap", action="store_true", help="an RMSNorm of x (the backend's kernel) before every GEMV, "
                    "its output the GEMV's input, as in a decoder layer: the overlap PDL gives is then realistic")
    a = ap.parse_args()
    variants = parse(a.variants) if a.variants else (VARIANTS2 if a.set == "2" else VARIANTS)
    from ninfer.kernels.nvrtc import compile_cubin

    if a.compile_only:
        _, cached = compile_cubin(source(variants), "gemv_lab", a.compile_only, ("-lineinfo",))
        print("gemv_lab", "cached" if cached else "compiled", len(variants), "variants")
        return

    import torch

    sys.path.insert(0, str(HERE))
    from decode import copy_bandwidth
    from timing import graph_us

    from ninfer.backends import installed_backends
    from ninfer.kernels.launch import Module
    from ninfer.kernels.ops import make_ops

    dev = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(dev)
    cubin, _ = compile_cubin(source(variants), "gemv_lab", f"sm_{major}{minor}", ("-lineinfo",))
    mod = Module(cubin, dev, label="gemv_lab", pdl_arch=f"sm_{major}{minor}")
    ops = make_ops(installed_backends()["sm90"].kernels)
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    cols = ["backend", "cuBLAS"] + [name(v)[4:] for v in variants]
    table = {}

    def measure(label: str, N: int, K: int, op: str) -> dict[str, float]:
        """Microseconds per call of the backend, cuBLAS and every variant on one shape."""
        n = max(2, (160 * 2**20) // (N * K * 2) + 1)  # copies past L2
        Ws = [(torch.randn(N, K, device="cuda") * K ** -0.5).to(torch.bfloat16) for _ in range(n)]
        xin = torch.randn(1, K, device="cuda").to(torch.bfloat16)
        y = torch.empty(N, dtype=torch.bfloat16, device="cuda")
        nw = torch.ones(K, device="cuda", dtype=torch.bfloat16)

        def pre():  # the GEMV's input: x itself, or an RMSNorm of x just computed
            return ops["rms_norm"](xin, nw, 1e-6) if a.gap else xin

        x = pre()
        ref = (x.float() @ Ws[0].float().T)[0]
        row = {"backend": graph_us(lambda i: ops[op](pre(), Ws[i % n])),
               "cuBLAS": graph_us(lambda i: torch.nn.functional.linear(pre(), Ws[i % n]))}
        for v in variants:
            R, U, S, WARPS, ST, PRE, _ = v
            k = mod[name(v)]
            grid = ((N // R + WARPS // S - 1) // (WARPS // S),)
            y.fill_(float("nan"))
            k(grid, (WARPS * 32,), Ws[0], x, y, N, K)
            torch.cuda.synchronize()
            err = ((y.float() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:
                print(f"FAILED {name(v)} on {label}: relative error {err}", flush=True)
                row[name(v)[4:]] = float("nan")
                continue
            row[name(v)[4:]] = graph_us(lambda i, k=k, grid=grid, WARPS=WARPS: k(grid, (WARPS * 32,), Ws[i % n], pre(),
                                                                                  y, N, K))
        return row

    for label, N, K, op in SHAPES:
        if a.shapes not in label:
            continue
        row = measure(label, N, K, op)
        table[label] = {c: N * K * 2 / us * 1e6 / bw for c, us in row.items()}
        best = max((c for c in cols[2:] if table[label][c] == table[label][c]), key=lambda c: table[label][c])
        print(f"{label:28s} backend {table[label]['backend']:.3f} ({row['backend']:.2f} us)  cuBLAS "
              f"{table[label]['cuBLAS']:.3f}  best {best} {table[label][best]:.3f} ({row[best]:.2f} us)",
              flush=True)
    print("\nfraction of copy bandwidth")
    print(f"{'variant':24s}" + "".join(f" {lab.split()[0][:2] + ' ' + lab.split()[-2][:9]:>13s}" for lab in table))
    for c in cols:
        print(f"{c:24s}" + "".join(f" {table[lab][c]:13.3f}" for lab in table))


if __name__ == "__main__":
    main()
