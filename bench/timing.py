"""Kernel timing shared by the benchmarks: capture ``inner`` calls in one CUDA graph, replay it, and take
the median time per call (CUDA events), after a warm-up on a side stream (compiles, allocator, counters)."""

from __future__ import annotations

import torch


def event_median_s(run, reps: int) -> float:
    """Median seconds of ``reps`` calls of ``run()`` on the current stream, each between two CUDA events."""
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return sorted(times)[len(times) // 2]


def graph_us(fn, inner: int = 20, reps: int = 15, drop: int = 2) -> float:
    """Median microseconds of one call; ``fn(i)`` is the i-th call of the graph (rotate inputs past L2 by i).
    The first ``drop`` replays are discarded."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn(i)
    times = []
    for _ in range(reps + drop):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / inner)
    del g
    kept = sorted(times[drop:])
    return kept[len(kept) // 2]


def decode_kernel_times(runner, tok: int, steps: int) -> tuple[dict[str, float], dict[str, int]]:
    """Profile ``steps`` greedy decode steps of ``runner`` from token ``tok`` (after 3 warm-up steps): device
    microseconds and launches per kernel name (first 60 characters), summed over the steps."""
    from collections import defaultdict

    from torch.profiler import ProfilerActivity, profile

    argmax = runner.model.ops.argmax
    for _ in range(3):
        tok = int(argmax(runner.decode(tok)[None])[0])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            tok = int(argmax(runner.decode(tok)[None])[0])
        torch.cuda.synchronize()
    total, count = defaultdict(float), defaultdict(int)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            key = ev.name.split("(")[0][:60]
            total[key] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            count[key] += 1
    return total, count


def decode_rates(runner, prompt: list[int], new: int) -> tuple[float, float | None]:
    """(pipelined, back to back) decode tok/s of ``runner`` (CUDA) after ``prompt``.

    Pipelined: the engine's loop on CUDA (ninfer.engine.pipeline), each step enqueued before the host reads the
    token that feeds it, greedy sampling on the device: the figure the benchmarks report. Back to back: the decode
    graph replayed ``new`` times with one sync at the end, the GPU's time a step without the host's (not a
    generation: the inputs stay those of the last step; None without a captured graph). Leaves the runner's
    sequence past its prompt: reset it before reuse."""
    import time

    from ninfer.config.sampling import SamplingParams
    from ninfer.engine.pipeline import DecodePipeline
    from ninfer.engine.sampler import Sampler

    runner.reset()
    pipe = DecodePipeline(runner, Sampler(SamplingParams(temperature=0.0), runner.device), runner.prefill(prompt))
    for _ in range(3):
        pipe.next(True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(new):
        pipe.next(True)
    tok_s = new / (time.perf_counter() - t0)
    pipe.close()
    g1 = runner.graphs.graphs.get(1) if runner.graphs is not None else None
    if g1 is None or g1.graph is None:
        return tok_s, None
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(new):
        g1.graph.replay()
    torch.cuda.synchronize()
    return tok_s, new / (time.perf_counter() - t0)
