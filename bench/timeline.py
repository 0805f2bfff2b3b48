"""Where a quantised decode step's time goes inside its CUDA graph, with PDL on, kernel by kernel.

``bench/quant.py --parts profile`` times each kernel of an eager step (no graph, no PDL), where every launch starts
after the last one ended. In the graph the launches overlap (a kernel's blocks sit in its PDL wait while the one
before runs; a GEMV's first weights are in flight by then), so a kernel's own duration says little about what it
adds to the step. This script replays the decode graph of a random-weight model of the full shape under the
profiler (CUPTI's kernel records: start and end of each launch) and charges each kernel what it adds to the step:
its end minus the latest end before it (0 where it ends inside an earlier one). Those increments add up to the step.
Grouped by kernel and grid (the grid tells the projections apart), with the weight bytes a GEMV group reads where
the grid names one weight shape, and that group's bandwidth over its increments.

    python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --steps 20

Also prints the step's span under the profiler beside the graph replayed back to back without it (the profiler
must not have changed the step much for the figures to mean anything), and the copy bandwidth measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant as qb  # noqa: E402


def kernel_events(prof) -> list[tuple[float, float, str, int]]:
    """(start us, end us, name, grid x) of every kernel a torch profiler recorded (its chrome trace), in start order."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    out = []
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") == "kernel" and "dur" in ev:
            grid = ev.get("args", {}).get("grid", [0])
            out.append((float(ev["ts"]), float(ev["ts"]) + float(ev["dur"]), ev["name"], int(grid[0])))
    out.sort()
    return out


def split_steps(events, gap_us: float):
    """The kernels cut into steps where the device sat idle longer than gap_us (the host's sync between steps)."""
    steps, cur, last_end = [], [], 0.0
    for ev in events:
        if cur and ev[0] - last_end > gap_us:
            steps.append(cur)
            cur = []
        last_end = ev[1] if not cur else max(last_end, ev[1])
        cur.append(ev)
    if cur:
        steps.append(cur)
    return steps


def short(name: str) -> str:
    name = name.split("(")[0]
    return re.sub(r"^void |<.*$", "", name)[:44]


# the weights whose one-token int4 GEMV makes its input's fixed-point form from the bf16 row itself (qmv1x; no op
# before them writes it): down (after the SwiGLU) and lm_head; the other one-token int4 GEMVs read a form (qmv1f*).
# Kernels of neither name (the int8 qmv1, which serves o and down alike) keep a shared grid unnamed.
ROWWISE = ("mlp.down", "lm_head")


def weight_groups(weights) -> dict[int, list[tuple[str, int]]]:
    """grid x -> [(weight name, bytes)] of the quantised weights whose one-token launch has that many blocks (a tile
    of 16 rows a block; the SwiGLU form a gate tile and its up tile a block)."""
    from ninfer.quant.layout import QuantWeight

    by = defaultdict(list)
    for path, w in weights.items():
        if isinstance(w, QuantWeight):
            n = w.scales.shape[0]
            tiles = -(-n // 16) // (2 if path.endswith("gate_up.weight") else 1)
            by[tiles].append((re.sub(r"^layers\.\d+\.", "", path), qb.read_bytes(w)))
    return by


def run(name: str, lm_head_bits: int, steps: int, bw: float, gap_us: float, variant: str = qb.DEFAULT):
    from timing import decode_rates
    from torch.profiler import ProfilerActivity, profile

    from ninfer.quant import gpu
    from ninfer.quant.layout import QuantWeight

    bits, *_, shape = qb.SHAPES[name]
    layers = qb.SHAPES[name][5]
    runner, weights = qb.quant_model(shape, layers, bits, dtype=torch.bfloat16, lm_head_bits=lm_head_bits)
    gpu.TILE_BITS = {4, 8}
    for w in weights.values():
        if isinstance(w, QuantWeight):
            gpu.prepare(w)
    qb.variant(variant)
    vocab = runner.cfg.vocab_size
    prompt = torch.randint(0, vocab, (512,), generator=torch.Generator().manual_seed(0)).tolist()
    tok_s, b2b = decode_rates(runner, prompt, 128)
    argmax = runner.model.ops.argmax
    runner.reset()
    tok = int(argmax(runner.prefill(prompt)[None])[0])
    for _ in range(4):  # eager first step, then the graph
        tok = int(argmax(runner.decode(tok)[None])[0])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            tok = int(argmax(runner.decode(tok)[None])[0])
            torch.cuda.synchronize()
            time.sleep(0.0005)  # an idle gap the steps are cut at
        torch.cuda.synchronize()
    events = kernel_events(prof)
    st = [s for s in split_steps(events, gap_us) if len(s) > 10]
    if not st:
        print(f"FAILED {name}: no kernel records in the trace ({len(events)} events)", flush=True)
        return
    counts = sorted({len(s) for s in st})
    span = sum(max(e[1] for e in s) - s[0][0] for s in st) / len(st)
    head = f", lm_head int{lm_head_bits}" if lm_head_bits else ""
    print(f"\n### {name}{head}, {variant}: {len(st)} steps of {counts} kernels; span under the profiler {span:.0f} us a step; "
          f"without it {1e6 / b2b if b2b else float('nan'):.0f} us back to back, pipelined {tok_s:.1f} tok/s",
          flush=True)
    inc = defaultdict(float)
    dur = defaultdict(float)
    cnt = defaultdict(int)
    lead = defaultdict(float)  # start minus the previous kernel's end: < 0 where PDL overlaps them
    for s in st:
        end = s[0][0]
        prev_end = s[0][0]
        for t0, t1, nm, gx in s:
            key = (short(nm), gx)
            inc[key] += max(0.0, t1 - end)
            dur[key] += t1 - t0
            lead[key] += t0 - prev_end
            cnt[key] += 1
            end = max(end, t1)
            prev_end = t1
    groups = weight_groups(weights)
    n = len(st)
    total = sum(inc.values()) / n
    print("| kernel | grid | calls a step | us a call (own) | start after the previous end, us | us a step added "
          "| of the step | weight (MB a call) | GB/s over its added time |\n|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for key in sorted(inc, key=lambda k: -inc[k]):
        nm, gx = key
        c = cnt[key] / n
        ws = groups.get(gx, []) if nm.startswith("qmv") else []
        if len({b for _, b in ws}) > 1 and nm.startswith(("qmv1x", "qmv1f")):  # a grid several weight shapes share:
            ws = [(w, b) for w, b in ws if w.startswith(ROWWISE) == nm.startswith("qmv1x")]  # told apart by the kernel
        wnames = sorted({w for w, _ in ws})
        wbytes = {b for _, b in ws}
        wtxt = (f"{'/'.join(wnames)} ({next(iter(wbytes)) / 1e6:.1f})" if len(wbytes) == 1 else
                "/".join(wnames) if wnames else "")
        gbs = (f"{next(iter(wbytes)) * c / (inc[key] / n * 1e-6) / 1e9:.0f}" if len(wbytes) == 1 and inc[key] > 0
               else "")
        print(f"| {nm} | {gx} | {c:.0f} | {dur[key] / cnt[key]:.1f} | {lead[key] / cnt[key]:+.1f} | "
              f"{inc[key] / n:.1f} | {inc[key] / n / total:.1%} | {wtxt} | {gbs} |", flush=True)
    qbytes = sum(qb.read_bytes(w) for w in weights.values() if isinstance(w, QuantWeight))
    print(f"step: {total:.0f} us added in all; the quantised weights ({qbytes / 1e9:.2f} GB) at copy bandwidth "
          f"({bw / 1e12:.2f} TB/s) take {qbytes / bw * 1e6:.0f} us", flush=True)
    del runner, weights
    torch.cuda.empty_cache()


def main():
    import decode as dec

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="27B W4A16 g128")
    ap.add_argument("--lm-head", default="int4", help="int8 / int4 / none, comma-separated")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gap-us", type=float, default=200.0, help="idle time that separates two steps")
    ap.add_argument("--variants", default=qb.DEFAULT, help="';'-separated labels of bench/quant.py's VARIANTS")
    a = ap.parse_args()
    variants = [v.strip() for v in a.variants.split(";")]
    unknown = [v for v in variants if v not in qb.VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}")
    bw = dec.copy_bandwidth()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s",
          flush=True)
    for name in a.models.split(","):
        for head in a.lm_head.split(","):
            for v in variants:
                qb.guarded(f"timeline {name}", run, name, {"none": 0, "int8": 8, "int4": 4}[head.strip()], a.steps, bw,
                           a.gap_us, v)


if __name__ == "__main__":
    main()
