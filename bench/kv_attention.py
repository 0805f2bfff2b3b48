"""Decode attention over a bf16 vs int8 vs int4 KV cache: one layer, batch 1, 1 and 4 query tokens, at 512, 8K
and 32K tokens of context, at the Llama-3-8B shape (32 q / 8 kv heads of 128) and the Qwen3.5-27B one (24 / 4
of 256). The bf16 flash-decoding kernel is the peer; the int8 / int4 rows are the kv_quant.cuh kernels.

Each op is captured INNER times into one CUDA graph and the graph replayed (median of 15 replays / INNER, in
us). Each call reads its own region of a pool larger than the L2 (as each layer of a model has its own cache),
so no call finds the previous one's bytes in L2. Bytes read: the K and V codes with their scales and offsets
(bf16: the K and V rows); the fraction is of the device copy bandwidth measured in the same call. The block
table holds exactly the context (capacity = context), block size 64.

    python bench/kv_attention.py --backend sm90 [--json out.json]
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

from ninfer.ops import DeviceSpec, resolve  # noqa: E402
from ninfer.quant.kv_cache import make_pool  # noqa: E402

SHAPES = {"8b": (32, 8, 128), "27b": (24, 4, 256)}
BS = 64
REGION_BYTES = 256 << 20  # the regions one graph replay walks through: several times the 60 MB L2


def kv_bytes(fmt: str, L: int, Hk: int, D: int) -> int:
    per_head = {"bf16": 2 * D, "int8": D + 2 * (D // 64), "int4": D // 2 + 4 * (D // 64)}[fmt]
    return 2 * L * Hk * per_head


def random_pool(fmt: str, is_key: bool, nblocks: int, Hk: int, D: int):
    if fmt == "bf16":
        return torch.randn(nblocks, BS, Hk, D, device="cuda", dtype=torch.bfloat16)
    p = make_pool(fmt, is_key, nblocks, BS, Hk, D, "cuda")
    if p.bits == 8:
        p.data.copy_(torch.randint(-127, 128, p.data.shape, device="cuda", dtype=torch.int8))
    else:
        p.data.copy_(torch.randint(0, 256, p.data.shape, device="cuda", dtype=torch.int32).to(torch.uint8))
        p.offset.copy_(-8 * (0.01 + 0.1 * torch.rand(p.offset.shape, device="cuda")))
    p.scale.copy_(0.01 + 0.1 * torch.rand(p.scale.shape, device="cuda"))
    p.centered = True
    return p


def bench_one(backend: str, fmt: str, Hq: int, Hk: int, D: int, L: int, T: int) -> dict:
    nbytes = kv_bytes(fmt, L, Hk, D)
    inner = max(20, min(400, -(-2 * REGION_BYTES // nbytes)))  # calls per graph: > 2 x REGION_BYTES read
    regions = max(2, min(inner, -(-REGION_BYTES // nbytes)))
    nblk = L // BS
    kc = random_pool(fmt, True, nblk * regions, Hk, D)
    vc = random_pool(fmt, False, nblk * regions, Hk, D)
    tables = [torch.randperm(nblk, device="cuda", dtype=torch.int32) + r * nblk for r in range(regions)]
    q = torch.randn(T, Hq, D, device="cuda", dtype=torch.bfloat16)
    positions = torch.arange(L - T, L, device="cuda")
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), torch.bfloat16), kv_format=fmt)
    fn = lambda i: ops.paged_attention(q, kc, vc, tables[i % regions], positions, D ** -0.5)  # noqa: E731
    us = graph_us(fn, inner, reps=15, drop=0)
    del fn
    torch.cuda.empty_cache()
    return {"fmt": fmt, "ctx": L, "T": T, "us": us, "MB": nbytes / 1e6, "GBs": nbytes / us / 1e3,
            "impl": ops.impls["paged_attention"].name}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shapes", default="8b,27b")
    ap.add_argument("--ctx", default="512,8192,32768")
    ap.add_argument("--tokens", default="1,4")
    ap.add_argument("--splits", default="", help="also time int8/int4 at these keys per split (8K, 32K)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s  backend {a.backend}")
    print("| shape | ctx | T | bf16 us | int8 us | int4 us | int4 / bf16 | MB read bf16 / int8 / int4 "
          "| fraction of copy bw bf16 / int8 / int4 |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for shape in a.shapes.split(","):
        Hq, Hk, D = SHAPES[shape]
        for L in map(int, a.ctx.split(",")):
            for T in map(int, a.tokens.split(",")):
                r = {f: bench_one(a.backend, f, Hq, Hk, D, L, T) for f in ("bf16", "int8", "int4")}
                for f in r.values():
                    f.update(shape=shape, bw_fraction=f["GBs"] * 1e9 / bw)
                    rows.append(f)
                mb = " / ".join(f"{x['MB']:.1f}" for x in r.values())
                frac = " / ".join(f"{x['bw_fraction']:.2f}" for x in r.values())
                print(f"| {shape} | {L} | {T} | {r['bf16']['us']:.1f} | {r['int8']['us']:.1f} | {r['int4']['us']:.1f} "
                      f"| {r['int4']['us'] / r['bf16']['us']:.2f} | {mb} | {frac} |", flush=True)
    if a.splits:
        from ninfer.kernels import kv_quant

        print("\nint8 / int4 us by keys per split (default: the bf16 path's split size for the capacity)")
        print("| shape | ctx | T | " + " | ".join(f"C={c}" for c in a.splits.split(",")) + " |")
        print("|---|---|---|" + "---|" * len(a.splits.split(",")))
        for shape in a.shapes.split(","):
            Hq, Hk, D = SHAPES[shape]
            for L in [x for x in map(int, a.ctx.split(",")) if x >= 8192]:
                for T in map(int, a.tokens.split(",")):
                    cells = []
                    for c in map(int, a.splits.split(",")):
                        kv_quant.SPLIT_KEYS = c
                        r = [bench_one(a.backend, f, Hq, Hk, D, L, T) for f in ("int8", "int4")]
                        for x in r:
                            x.update(shape=shape, split=c, bw_fraction=x["GBs"] * 1e9 / bw)
                        rows.extend(r)
                        cells.append(f"{r[0]['us']:.1f} / {r[1]['us']:.1f}")
                    kv_quant.SPLIT_KEYS = 0
                    print(f"| {shape} | {L} | {T} | " + " | ".join(cells) + " |", flush=True)
    for x in rows:
        if x["fmt"] != "bf16" and "kvq_attention" not in x["impl"]:
            print(f"WARNING: {x['fmt']} ran {x['impl']}, not the kernel")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
