"""Where one long prefill's time goes: a random-weight model of a real shape (default the Qwen3.5-27B hybrid,
all 64 layers) prefilling CTX tokens through the engine's runner (2048-token pieces), on one backend.

First the prefill tok/s of each variant (environment switches, one model; each prefill warmed once at the
same shape, then timed with the device synchronised around it):
  default    the current path (chunked Gated DeltaNet kernels, tensor-core state pass, conv1d prefill kernel,
             bottom-right SDPA)
  attn_mask  full attention of later pieces through the boolean mask tensor (NINFER_PREFILL_ATTN=mask)
  gdn_simt   the chunked rule's CUDA-core state pass, 16-column value slices (NINFER_GDN_CHUNK_STATE=simt)
  gdn_bv32   the same with 32-column value slices (NINFER_GDN_CHUNK_BV=32)
  before     the path before the chunked kernels: token-by-token rule, reference conv, mask SDPA
  X+piece=N  variant X with the runner's prefill pieces of N tokens (2048 by default)
With --repeats R every variant but "before" is timed R times, round-robin, and the median (min..max) printed.
Then (before the slow "before" variant) one default prefill under torch.profiler: its device kernels grouped (GEMM, attention, Gated DeltaNet,
elementwise/other) with their share of the wall time, the top kernels, and the host synchronisations.

    python bench/prefill_profile.py [--shape qwen3.5-27b] [--ctx 8192] [--variants default,attn_mask,before]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_model as rm  # noqa: E402

VARIANTS = {  # environment switches; "piece=N" in a variant's name also sets the runner's prefill piece size
    "default": {},
    "attn_mask": {"NINFER_PREFILL_ATTN": "mask"},
    "gdn_simt": {"NINFER_GDN_CHUNK_STATE": "simt"},
    "gdn_bv32": {"NINFER_GDN_CHUNK_STATE": "simt", "NINFER_GDN_CHUNK_BV": "32"},
    "before": {"NINFER_GDN_CHUNKED": "0", "NINFER_PREFILL_ATTN": "mask"},
}


def variant_env(v: str) -> tuple[dict, int | None]:
    """A variant's environment and prefill piece size: a VARIANTS key, optionally with "+piece=N"."""
    name, _, piece = v.partition("+piece=")
    return VARIANTS[name], (int(piece) if piece else None)
GROUPS = (("attention", ("flash", "fmha", "attention", "sdpa")),  # before gemm: flash kernels name cutlass
          ("gemm", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "splitk")),
          ("gated_deltanet", ("gdn_", "conv1d", "trsm", "triangular")))


def group(name: str) -> str:
    low = name.lower()
    for g, keys in GROUPS:
        if any(k in low for k in keys):
            return g
    return "other"


def timed_prefill(runner, prompt) -> float:
    runner.reset()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    runner.prefill(prompt)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def with_env(env: dict, fn):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def profile(runner, prompt, top: int):
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    runner.reset()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        runner.prefill(prompt)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    per_kernel = defaultdict(lambda: [0, 0.0])  # name -> [calls, us]
    host_syncs = defaultdict(int)
    busy = 0.0
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            us = e.time_range.elapsed_us()
            per_kernel[e.name][0] += 1
            per_kernel[e.name][1] += us
            busy += us
        elif "Synchronize" in e.name or e.name in ("cudaMemcpy", "aten::item", "aten::_local_scalar_dense"):
            host_syncs[e.name] += 1
    print(f"profiled prefill of {len(prompt)} tokens: wall {wall * 1e3:.1f} ms (under the profiler), device "
          f"kernels {busy / 1e3:.1f} ms ({busy / 1e6 / wall:.0%} of wall)", flush=True)
    groups = defaultdict(float)
    for name, (_, us) in per_kernel.items():
        groups[group(name)] += us
    for g, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {g:15} {us / 1e3:9.1f} ms  {us / busy:6.1%} of kernel time", flush=True)
    print(f"top {top} kernels (calls, total ms, group):", flush=True)
    for name, (calls, us) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us / 1e3:9.2f} ms {calls:6d}x  {group(name):14} {name[:110]}", flush=True)
    print("host synchronisations: " + (", ".join(f"{k} x{v}" for k, v in sorted(host_syncs.items())) or "none"),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="qwen3.5-27b")
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--variants", default="default,attn_mask,gdn_simt,gdn_bv32,before")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-profile", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/prefill_profile.py needs a CUDA GPU; run it on the GPU machine.")
    runner, _ = rm.build(a.shape, a.backend, "cuda", torch.bfloat16, a.ctx + 64, layers=a.layers)
    prompt = torch.randint(0, runner.cfg.vocab_size, (a.ctx,), generator=torch.Generator().manual_seed(0)).tolist()
    print(f"{torch.cuda.get_device_name()}  {a.shape} ({runner.cfg.num_layers} layers) ctx {a.ctx} backend "
          f"{a.backend}  torch {torch.__version__}", flush=True)
    variants = a.variants.split(",")
    early = [v for v in variants if v != "before"]  # the slow old path last, after the profile

    base_piece = runner.prefill_chunk

    def timed(v):
        env, piece = variant_env(v)
        runner.prefill_chunk = piece or base_piece
        try:
            return with_env(env, lambda: timed_prefill(runner, prompt))
        finally:
            runner.prefill_chunk = base_piece

    def report(v, ts):
        ts = sorted(ts)
        med = statistics.median(ts)
        print(f"RESULT prefill {a.shape} ctx={a.ctx} {v:22}: {a.ctx / med:8.0f} tok/s median of {len(ts)} "
              f"({a.ctx / ts[-1]:.0f}..{a.ctx / ts[0]:.0f}; {med * 1e3:.1f} ms)", flush=True)

    def measure(v):
        timed(v)  # warm-up at this shape
        report(v, [timed(v)])

    for v in early:
        timed(v)  # warm-up at this shape
    times = {v: [] for v in early}
    for _ in range(a.repeats):  # round-robin: drift over the call affects every variant alike
        for v in early:
            times[v].append(timed(v))
    for v in early:
        report(v, times[v])
    if not a.no_profile:
        profile(runner, prompt, a.top)
    for v in variants:
        if v not in early:
            measure(v)


if __name__ == "__main__":
    main()
