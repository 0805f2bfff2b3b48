"""The one-token int4 GEMV with warp specialisation (bench/kernels/qmv_ws.cu: a producer warp streams each block's
contiguous share of the weight with the copy engine, consumer warps multiply from shared memory) against main's
qmv1, on the Qwen3.5-27B shapes: checked against x @ dequant(W)^T in float32 and against qmv1, then timed beside
the copy bandwidth measured in the same process and beside qmv1 (the peer).

    python bench/qmv_ws.py --builds=",-DWS_NS=6"      # one row per build of the kernel (its -D options)

Kernels compile with NVRTC on first use (cached in NINFER_KERNEL_CACHE); `--precompile sm_90` compiles them here
without a GPU (bench/session22 device scripts carry the cache).
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


def source() -> Path:
    """qgemv.cu with the bench kernel appended, written where the kernel cache lives (the text is the cache key)."""
    from ninfer.quant import gpu

    text = gpu.SOURCE.read_text() + "\n" + (HERE / "kernels" / "qmv_ws.cu").read_text()
    p = Path(os.environ.get("NINFER_KERNEL_CACHE", "/tmp")) / "qmv_ws_full.cu"
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.exists() or p.read_text() != text:
        p.write_text(text)
    return p


def extra(defs: str) -> tuple[str, ...]:
    return ("-DQM_BENCH_ONLY",) + tuple(defs.split())


def define(defs: str, name: str, default: int) -> int:
    for d in defs.split():
        if d.startswith(f"-D{name}="):
            return int(d.split("=", 1)[1])
    return default


def launch_ws(kern, w, x, y, wsum, wcount, defs: str, per_sm: dict):
    from ninfer.quant import gpu
    from ninfer.quant.layout import TILE_ROWS

    n, k = w.scales.shape[0], w.in_features
    ns, sc, ncw = define(defs, "WS_NS", 4), define(defs, "WS_SC", 16), define(defs, "WS_NCW", 8)
    threads = (ncw + 1) * 32
    smem = ns * (sc * 512 + 1024) + 2 * k
    key = (id(kern), smem)
    if key not in per_sm:
        from ninfer.kernels.launch import _driver, _ok

        if smem > 48 * 1024:
            kern.set_max_dynamic_smem(smem)
        per_sm[key] = int(_ok(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(kern.fn, threads, smem),
                              "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    tiles, spt = -(-n // TILE_ROWS), k // 64 // sc
    grid = max(1, per_sm[key]) * torch.cuda.get_device_properties(x.device).multi_processor_count
    # stages a unit: a whole tile where the tiles make 4 rounds of the grid, else the largest divisor that does
    ups = next((u for u in range(spt, 0, -1) if spt % u == 0 and tiles * (spt // u) >= 4 * grid), 1)
    grid = min(grid, tiles * spt if define(defs, "WS_CONTIG", 0) else tiles * spt // ups)
    sp, _ = gpu.tile_params(w)
    kern((grid,), (threads,), w.qweight, sp, x, y, wsum, wcount, n, k, w.group_size, ups, smem=smem)
    return grid, per_sm[key], ups


_mods: dict = {}


def module(dev, defs: str):
    """The bench build's module, launched with programmatic dependent launch as main's kernels are (the producer
    waits before it copies the token; the weights' first stages are asked for ahead)."""
    from ninfer.kernels.launch import Module
    from ninfer.quant import gpu

    if defs not in _mods:
        major, minor = torch.cuda.get_device_capability(dev)
        arch = f"sm_{major}{minor}"
        _mods[defs] = Module(gpu.compile_for(arch, extra=extra(defs), source=source()), dev.index or 0,
                             label="qmv-ws", pdl_arch=arch)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", default="", help="builds of the kernel, comma-separated -D options ('' the default)")
    ap.add_argument("--precompile", default=None, help="an arch (sm_90): compile the builds here and stop")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    args.defs = [d.strip() for d in args.builds.split(",")]
    from ninfer.quant import gpu

    if args.precompile:
        for d in args.defs:
            gpu.compile_for(args.precompile, extra=extra(d), source=source())
            print(f"compiled {d!r}", flush=True)
        return
    from decode import copy_bandwidth
    from quant import random_quant

    from ninfer.quant.layout import dequantize

    dev = torch.device("cuda")
    bw = copy_bandwidth()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.version.cuda and torch.__version__}, copy bandwidth "
          f"{bw / 1e12:.2f} TB/s", flush=True)
    torch.manual_seed(0)
    per_sm: dict = {}
    print("| shape | build | grid (blocks / SM), stages a unit | rel err vs fp32 ref | vs qmv1 | us | of copy bw | qmv1 us | qmv1 of copy bw |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for n, k, label in SHAPES:
        copies = max(2, -(-300 * 2**20 // (n * k // 2)))  # more bytes than L2 holds, cycled
        ws_ = [gpu.prepare(random_quant(n, k, 4, GROUP, device="cuda")) for _ in range(copies)]
        nbytes = ws_[0].qweight.numel() + gpu.tile_params(ws_[0])[0].numel() * 4
        x = (torch.randn(1, k, device=dev) * 0.5).to(torch.bfloat16)
        ref = (x.float() @ dequantize(ws_[0], torch.float32).T).flatten()
        y_main = gpu.quant_linear(x, ws_[0]).float().flatten()
        tiles = -(-n // 16)
        wsum = torch.zeros(tiles * 16, dtype=torch.float32, device=dev)
        wcount = torch.zeros(tiles, dtype=torch.int32, device=dev)

        y_buf = torch.empty(1, n, dtype=torch.bfloat16, device=dev)
        t_main = timed(lambda i, ws_=ws_, x=x: gpu.quant_linear(x, ws_[i]), copies, args.iters)
        for d in args.defs:
            if k % (64 * define(d, "WS_SC", 16)):
                print(f"| {label} {n}x{k} | `{d}` | K is no multiple of a stage's 64 x WS_SC k: not run |")
                continue
            kern = module(dev, d)["qmvws_bf16_sf16_b4_sym"]
            y = torch.zeros(1, n, dtype=torch.bfloat16, device=dev)
            grid, bps, ups = launch_ws(kern, ws_[0], x, y, wsum, wcount, d, per_sm)
            torch.cuda.synchronize()
            yf = y.float().flatten()
            err_ref = ((yf - ref).norm() / ref.norm()).item()
            err_main = ((yf - y_main).norm() / y_main.norm()).item()
            clean = bool((wsum == 0).all().item() and (wcount == 0).all().item())
            t_ws = timed(lambda i, a=(kern, ws_, x, y_buf, wsum, wcount, d): launch_ws(a[0], a[1][i], *a[2:], per_sm),
                         copies, args.iters)
            if define(d, "WS_DIAG", 0):
                err_ref = err_main = float("nan")  # (a measurement: the products are left out)
            print(f"| {label} {n}x{k} | `{d or 'default'}` | {grid} ({bps}), {ups} | {err_ref:.2e} | {err_main:.2e}"
                  f"{'' if clean else ' (workspace left dirty!)'} | {t_ws:.1f} | {nbytes / (t_ws * 1e-6) / bw:.3f} | "
                  f"{t_main:.1f} | {nbytes / (t_main * 1e-6) / bw:.3f} |", flush=True)
        del ws_


if __name__ == "__main__":
    main()
