"""The one-token int4 GEMV with its products on the integer tensor cores (bench/kernels/qmv_i8.cu: the token as
16-bit fixed point a group, split into two signed bytes; codes unpacked to bytes with 3 ALU instructions a word; IMMA
u8 x s8) against main's qmv1 (bf16 dequantisation, HMMA), on the Qwen3.5-27B shapes. Each is timed reading its weight
from memory and with its products alone (-DQMV_DIAG=3 / -DI8_DIAG=3: every burst is the warp's first again, from
L1): on the H200, qmv1's products alone take about as long as its weight takes to stream (bench/RESULTS.md, sessions
16 and 21), so the time of the products alone is the figure this form is meant to cut.

    python bench/qmv_i8.py                      # on a GPU: check, then time
    python bench/qmv_i8.py --precompile sm_90   # here: compile the builds into NINFER_KERNEL_CACHE

The token's fixed-point form is ninfer.quant.fixed's reference (not timed; in the engine the norm before the GEMV makes
it). Its k order against pack_tiles' codes is tested in tests/test_quant_fixed.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

GROUP = 128
SHAPES = [(34816, 5120, "gate_up"), (5120, 17408, "down"), (12288, 5120, "gdn in_proj"), (5120, 6144, "attn o")]
BUILDS = [""]  # each also with -DI8_DIAG=3 (its products alone); "@wN": N warps a tile


def source() -> Path:
    from ninfer.quant import gpu

    text = gpu.SOURCE.read_text() + "\n" + (HERE / "kernels" / "qmv_i8.cu").read_text()
    p = Path(os.environ.get("NINFER_KERNEL_CACHE", "/tmp")) / "qmv_i8_full.cu"
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.exists() or p.read_text() != text:
        p.write_text(text)
    return p


def extra(defs: str) -> tuple[str, ...]:
    return ("-DQM_BENCH_ONLY",) + tuple(defs.split())


_mods: dict = {}


def module(dev, defs: str):
    from ninfer.kernels.launch import Module
    from ninfer.quant import gpu

    if defs not in _mods:
        major, minor = torch.cuda.get_device_capability(dev)
        arch = f"sm_{major}{minor}"
        _mods[defs] = Module(gpu.compile_for(arch, extra=extra(defs), source=source()), dev.index or 0,
                             label="qmv-i8", pdl_arch=arch)
    return _mods[defs]


def timed(fn, copies: int, iters: int) -> float:
    """Microseconds a launch: fn(i) for the weight copies i cycled in one CUDA graph, best of 5 timed runs."""
    for i in range(copies):
        fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(copies * 4):
            fn(i % copies)
    g.replay()
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        t0.record()
        for _ in range(iters):
            g.replay()
        t1.record()
        torch.cuda.synchronize()
        best = min(best, t0.elapsed_time(t1) * 1e3 / (iters * copies * 4))
    return best


def main_row(ws_, x, copies: int, iters: int):
    """main's quant_linear on x: (the output for ws_[0] in float32, us a launch, us with its products alone)."""
    from ninfer.quant import gpu

    y = gpu.quant_linear(x, ws_[0]).float().flatten()
    times = []
    for diag in ((), ("-DQMV_DIAG=3",)):
        gpu.BENCH_EXTRA = diag
        times.append(timed(lambda i, ws_=ws_, x=x: gpu.quant_linear(x, ws_[i]), copies, iters))
    gpu.BENCH_EXTRA = ()
    return y, times[0], times[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", default=",".join(BUILDS), help="builds of the kernel, comma-separated -D options")
    ap.add_argument("--main-builds", default="", help="builds of main's library (comma-separated -D options) whose "
                    "qmv1f rows to add, timed reading the weight only")
    ap.add_argument("--precompile", default=None, help="an arch (sm_90): compile the builds here and stop")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    defs = [d.strip() for d in args.builds.split(",")]
    from ninfer.quant import gpu

    if args.precompile:
        for d in defs:
            opts = " ".join(o for o in d.split() if not o.startswith("@w"))
            for diag in ("", " -DI8_DIAG=3"):
                gpu.compile_for(args.precompile, extra=extra((opts + diag).strip()), source=source())
            print(f"compiled {opts!r}", flush=True)
        return
    from decode import copy_bandwidth
    from quant import random_quant

    from ninfer.quant import fixed
    from ninfer.quant.layout import dequantize

    dev = torch.device("cuda")
    bw = copy_bandwidth()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s",
          flush=True)
    torch.manual_seed(0)
    print("| shape | kernel | rel err vs fp32 ref | vs qmv1 | us | of copy bw | products alone us |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for n, k, label in SHAPES:
        copies = max(2, -(-300 * 2**20 // (n * k // 2)))  # more bytes than L2 holds, cycled
        ws_ = [gpu.prepare(random_quant(n, k, 4, GROUP, device="cuda")) for _ in range(copies)]
        nbytes = ws_[0].qweight.numel() + gpu.tile_params(ws_[0])[0].numel() * 4
        x = (torch.randn(1, k, device=dev) * 0.5).to(torch.bfloat16)
        x[0, :: 97] *= 20  # a few outliers, as real activations have
        ref = (x.float() @ dequantize(ws_[0], torch.float32).T).flatten()
        xq, xg = fixed.fixed_point(x.flatten())
        xf = fixed.attach(x.clone(), xq, xg)  # main's qmv1f: the same token with the form, as the norm attaches it
        y_main = None
        for name, xx, on in (("qmv1 (main; peer)", x, False), ("qmv1f (main, fixed point)", xf, True)):
            gpu.QMV1F = on
            y, t_w, t_p = main_row(ws_, xx, copies, args.iters)
            y_main = y if y_main is None else y_main
            print(f"| {label} {n}x{k} | {name} | {((y - ref).norm() / ref.norm()).item():.2e} | "
                  f"{'-' if y is y_main else f'{((y - y_main).norm() / y_main.norm()).item():.2e}'} | {t_w:.1f} | "
                  f"{nbytes / (t_w * 1e-6) / bw:.3f} | {t_p:.1f} |", flush=True)
        for mb in [b.strip() for b in args.main_builds.split(",") if b.strip()]:
            gpu.QMV1F, gpu.BENCH_EXTRA = True, tuple(mb.split())
            y = gpu.quant_linear(xf, ws_[0]).float().flatten()
            t_w = timed(lambda i, ws_=ws_, xf=xf: gpu.quant_linear(xf, ws_[i]), copies, args.iters)
            gpu.BENCH_EXTRA = ()
            print(f"| {label} {n}x{k} | qmv1f `{mb}` | {((y - ref).norm() / ref.norm()).item():.2e} | "
                  f"{((y - y_main).norm() / y_main.norm()).item():.2e} | {t_w:.1f} | "
                  f"{nbytes / (t_w * 1e-6) / bw:.3f} | - |", flush=True)
        gpu.QMV1F = False
        tiles = -(-n // 16)
        plan = gpu.qmv_warps(gpu._module(dev)[gpu.qmv_kernel_name(x.dtype, torch.float16, 4, False)], tiles, k, 4,
                             dev)
        for d in defs:
            opts = " ".join(o for o in d.split() if not o.startswith("@w"))
            warps = next((int(o[2:]) for o in d.split() if o.startswith("@w")), plan)
            row = []
            for diag in ("", " -DI8_DIAG=3"):
                kern = module(dev, (opts + diag).strip())["qmvi8_bf16_sf16_b4_sym"]
                y = torch.zeros(1, n, dtype=torch.bfloat16, device=dev)

                def launch(i, kern=kern, y=y, warps=warps, ws_=ws_, tiles=tiles, xq=xq, xg=xg, n=n, k=k):
                    kern((tiles,), (warps * 32,), ws_[i].qweight, gpu.tile_params(ws_[i])[0], xq, xg, y, n, k)

                launch(0)
                torch.cuda.synchronize()
                yf = y.float().flatten()
                row.append(timed(launch, copies, args.iters))
                if not diag:
                    err_ref = ((yf - ref).norm() / ref.norm()).item()
                    err_m = ((yf - y_main).norm() / y_main.norm()).item()
            print(f"| {label} {n}x{k} | int8 tensor cores `{opts or 'default'}`, {warps} warps a tile | {err_ref:.2e} | "
                  f"{err_m:.2e} | {row[0]:.1f} | {nbytes / (row[0] * 1e-6) / bw:.3f} | {row[1]:.1f} |", flush=True)
        del ws_


if __name__ == "__main__":
    main()
