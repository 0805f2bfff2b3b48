"""Decode / verify attention (bf16 paged flash-decoding: split + combine) at short and medium context in a block
table of a server's default capacity (32K tokens): compile-option variants of the kernels A/B in one process on
the same data, each checked against the float32 reference before it is timed.

Each call is captured INNER times into one CUDA graph and the graph replayed (median of 15 replays / INNER, us);
consecutive calls read their own region of a pool larger than the L2 (as each layer of a model has its own
cache), so no call finds the previous one's K/V in L2. PDL as the model launches it (NINFER_PDL).

    python bench/attn_decode.py --variants 'old:-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE;new:' \\
        [--ctx 512,4096] [--tokens 1,4] [--capacity 32768] [--json out.json]

A variant is name:options[:min_split[:max_splits[:block_rows]]]: extra compile options of the backend's kernels, and
ninfer.kernels.attention's MIN_SPLIT (the fewest keys per split, default 32), ONE_PASS_MAX_SPLITS (the most splits of
a launch whose blocks all run the one-pass form, default 64, 0: no limit) and BLOCK_ROWS (query rows per block,
default 8). A variant named after a cluster form (cluster16w4, cluster8w8, cluster16w8: the one-launch decode kernel,
attention.cuh: attention_cluster) runs with NINFER_ATTN_CLUSTER set to it; every other with it off. Every variant's
library must be compiled (cached).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from decode import copy_bandwidth  # noqa: E402
from timing import graph_us  # noqa: E402

from ninfer.kernels.library import ATTN_CLUSTER_FORMS  # noqa: E402
from ninfer.ops import DeviceSpec, resolve  # noqa: E402
from ninfer.reference import ops as ref  # noqa: E402

SHAPES = {"8b": (32, 8, 128), "27b": (24, 4, 256)}
BS = 64
REGION_BYTES = 256 << 20


def parse_variants(spec: str) -> list[tuple[str, tuple[str, ...], tuple[int, int, int]]]:
    out = []
    for v in spec.split(";"):
        parts = v.split(":") + [""] * 4
        knobs = tuple(int(p) if p.strip() else d for p, d in zip(parts[2:5], (32, 64, 8)))
        out.append((parts[0].strip(), tuple(parts[1].split()), knobs))
    return out


def call_fn(ops, q, kc, vc, tables, positions, scale):
    """The graph's i-th call: the op over the i-th region's block table."""
    return lambda i: ops.paged_attention(q, kc, vc, tables[i % len(tables)], positions, scale)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shapes", default="8b,27b")
    ap.add_argument("--ctx", default="512,4096")
    ap.add_argument("--tokens", default="1,4")
    ap.add_argument("--capacity", type=int, default=32768)
    ap.add_argument("--variants", default="old:-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE;new:")
    ap.add_argument("--reps", type=int, default=2, help="rounds over the variants (interleaved)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from ninfer.backends import installed_backends
    from ninfer.kernels import attention

    lib = installed_backends()[a.backend].kernels
    base = lib.options
    variants = parse_variants(a.variants)

    def use(opts, knobs, name=""):
        os.environ["NINFER_ATTN_CLUSTER"] = name if name in ATTN_CLUSTER_FORMS else "0"  # read at each launch
        lib.set_options(base + opts)
        attention.MIN_SPLIT, attention.ONE_PASS_MAX_SPLITS, attention.BLOCK_ROWS = knobs

    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s  backend {a.backend}  "
          f"table {a.capacity} tokens  torch {torch.__version__}", flush=True)
    print("| shape | ctx | T | MB K+V | " + " | ".join(f"{n} us" for n, _, _ in variants) + " |")
    print("|---|---|---|---|" + "---|" * len(variants))
    rows = []
    ops = resolve(a.backend, DeviceSpec.of(torch.device("cuda"), torch.bfloat16))
    for shape in a.shapes.split(","):
        Hq, Hk, D = SHAPES[shape]
        for L in map(int, a.ctx.split(",")):
            nbytes = 2 * L * Hk * D * 2
            inner = max(20, min(200, -(-2 * REGION_BYTES // nbytes)))
            regions = max(2, min(inner, -(-REGION_BYTES // nbytes)))
            nblk = -(-L // BS)
            kc = torch.randn(nblk * regions, BS, Hk, D, device="cuda", dtype=torch.bfloat16)
            vc = torch.randn(nblk * regions, BS, Hk, D, device="cuda", dtype=torch.bfloat16)
            tables = []
            for r in range(regions):
                t = torch.zeros(a.capacity // BS, device="cuda", dtype=torch.int32)
                t[:nblk] = torch.randperm(nblk, device="cuda", dtype=torch.int32) + r * nblk
                tables.append(t)
            for T in map(int, a.tokens.split(",")):
                q = torch.randn(T, Hq, D, device="cuda", dtype=torch.bfloat16)
                positions = torch.arange(L - T, L, device="cuda")
                want = ref.paged_attention(q.float(), kc.float(), vc.float(), tables[0], positions, D ** -0.5)
                times = {n: [] for n, _, _ in variants}
                errs = {}
                for _ in range(a.reps):
                    for name, opts, knobs in variants:
                        use(opts, knobs, name)
                        out = ops.paged_attention(q, kc, vc, tables[0], positions, D ** -0.5)
                        errs[name] = float((out.float() - want).norm() / want.norm())
                        fn = call_fn(ops, q, kc, vc, tables, positions, D ** -0.5)
                        times[name].append(graph_us(fn, inner, reps=15, drop=0))
                cells = []
                for name, _, _ in variants:
                    t = times[name]
                    bad = "" if errs[name] < 1e-2 else f" WRONG(rel err {errs[name]:.3g})"
                    cells.append(" / ".join(f"{x:.1f}" for x in t) + bad)
                    rows.append({"shape": shape, "ctx": L, "T": T, "variant": name, "us": t, "rel_err": errs[name],
                                 "MB": nbytes / 1e6, "capacity": a.capacity})
                print(f"| {shape} | {L} | {T} | {nbytes / 1e6:.1f} | " + " | ".join(cells) + " |", flush=True)
            del kc, vc, tables
            torch.cuda.empty_cache()
    use((), (32, 64, 8))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "variants": a.variants, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
