"""Where a decode step's GPU time goes: kernel times of eager decode steps (CUDA graphs off, so every
kernel is its own launch; kernel durations are those the graph replays), grouped by kernel name, with
the bytes the GEMVs must read as a yardstick.

    python bench/decode_profile.py --shape qwen3.5-27b --layers 8 --steps 5
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_model as rm  # noqa: E402
from timing import decode_kernel_times  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3.5-27b")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--opts", default="", help="extra compile options of the backend's kernels (precompiled), e.g. "
                    "'-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE' (the decode attention kernels before)")
    ap.add_argument("--capacity", type=int, default=None, help="the KV block table's length in tokens (default: "
                    "the context + 64)")
    a = ap.parse_args()
    os.environ["NINFER_CUDA_GRAPHS"] = "0"
    if a.opts:
        from ninfer.backends import installed_backends

        lib = installed_backends()[a.backend].kernels
        lib.set_options(lib.options + tuple(a.opts.split()))
    runner, weights = rm.build(a.shape, a.backend, "cuda", torch.bfloat16, max(a.capacity or 0, a.ctx + 64),
                              layers=a.layers)
    prompt = torch.randint(0, runner.cfg.vocab_size, (a.ctx,), generator=torch.Generator().manual_seed(0)).tolist()
    argmax = runner.model.ops.argmax
    total, count = decode_kernel_times(runner, int(argmax(runner.prefill(prompt)[None])[0]), a.steps)
    all_us = sum(total.values()) / a.steps
    print(f"{a.shape} x{a.layers} layers, ctx {a.ctx}{' ' + a.opts if a.opts else ''}: {all_us:.0f} us of kernels "
          f"per decode step ({sum(count.values()) / a.steps:.0f} kernels)")
    print(f"{'kernel':60s} {'us/step':>9s} {'calls/step':>10s} {'us/call':>8s} {'share':>6s}")
    for name, us in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
        per = us / a.steps
        n = count[name] / a.steps
        print(f"{name:60s} {per:9.1f} {n:10.1f} {per / n:8.2f} {per / all_us:6.1%}")


if __name__ == "__main__":
    main()
