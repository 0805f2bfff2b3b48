"""What one kernel boundary costs inside a CUDA graph with PDL, apart from any kernel's own work.

bench/timeline.py charges the decode step's small kernels (norms, the recurrence, attention) 23 % of a 27B W4A16 step
on an H100, 2.3-7 us each. How much of that is the handoff itself: the kernel before completing and its writes made
visible, then the waiting kernel's griddepcontrol.wait returning? Here, in one CUDA graph, chains of

  stream: a GEMV-like kernel (PDL-aware: waits first, then lets the next launch) reading a large buffer, one
          block per 144 KB chunk, 320 blocks (the 27B down projection's 46 MB and grid);
  empty:  one block that waits, lets the next launch, and exits;
  norm:   the backend's add_rms_norm of one 5120-wide row with the fixed-point form (the 27B's norm);

are replayed under the profiler, and each kernel is charged its end minus the latest end before it, as timeline.py
does. "empty" after "stream" is the bare handoff; "norm" after "stream" the norm's; "stream" after "empty" the
GEMV's ramp.

    python bench/pdl_handoff.py
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SOURCE = r"""
#include <ninfer/common.cuh>
extern "C" __global__ void __launch_bounds__(256) stream_chunks(const uint4 *__restrict__ w, long long per_block,
                                                                float *__restrict__ out) {
    const uint4 *p = w + (long long)blockIdx.x * per_block;
    uint4 first = __ldg(p + threadIdx.x);  // a weight read before the wait, as the GEMVs do
    ninfer::pdl_wait();
    ninfer::pdl_trigger();
    unsigned acc = first.x ^ first.y ^ first.z ^ first.w;
    for (long long i = threadIdx.x + blockDim.x; i < per_block; i += blockDim.x * 4) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = i + u * blockDim.x < per_block ? __ldg(p + i + u * blockDim.x) : first;
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678u) out[blockIdx.x] = 1.f;  // keeps the loads
}
extern "C" __global__ void empty_kernel(float *out) {
    ninfer::pdl_wait();
    ninfer::pdl_trigger();
    if (out[0] == 12345.f) out[1] = 0.f;
}
"""


def main():
    import decode as dec
    from timeline import kernel_events
    from torch.profiler import ProfilerActivity, profile

    from ninfer.kernels.launch import Module
    from ninfer.kernels.nvrtc import compile_cubin
    from ninfer.ops import DeviceSpec, resolve

    dev = torch.device("cuda")
    bw = dec.copy_bandwidth()
    print(f"GPU: {torch.cuda.get_device_name()}, copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    cubin, _ = compile_cubin(SOURCE, "pdl_handoff", "sm_90")
    mod = Module(cubin, dev.index or 0, "pdl_handoff", pdl_arch="sm_90")
    blocks, chunk = 320, 144 * 1024 // 16  # uint4s a block
    copies = 8  # distinct buffers, 368 MB in all, so each stream reads from memory, not L2
    bufs = [torch.randint(0, 2 ** 31, (blocks * chunk * 4,), dtype=torch.int32, device=dev) for _ in range(copies)]
    out = torch.zeros(blocks + 2, device=dev)
    ops = resolve("sm90", DeviceSpec.of(dev, torch.bfloat16))
    x = torch.randn(1, 5120, device=dev).bfloat16()
    r = torch.randn(1, 5120, device=dev).bfloat16()
    nw = (torch.rand(5120, device=dev) * 0.1).bfloat16()

    def stream(i):
        mod["stream_chunks"]((blocks,), (256,), bufs[i % copies], ctypes.c_longlong(chunk), out)

    def empty():
        mod["empty_kernel"]((1,), (32,), out)

    def norm():
        ops.add_rms_norm(x, r, nw, 1e-6, True, fixed=True)

    def norm_no_form():
        ops.add_rms_norm(x, r, nw, 1e-6, True)

    def rms():  # the plain norm, no residual add, no form
        ops.rms_norm(x, nw, 1e-6, True)

    chains = {  # name: the kernels of one link, repeated
        "stream -> stream": [stream, stream],
        "stream -> empty": [stream, empty],
        "stream -> empty -> empty": [stream, empty, empty],
        "stream -> norm": [stream, norm],
        "stream -> norm -> empty": [stream, norm, empty],
        "stream -> norm without the form": [stream, norm_no_form],
        "stream -> rms_norm alone": [stream, rms],
    }
    reps = 24
    for name, link in chains.items():
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):  # warm-up (and first compiles) outside the capture
                for fn in link:
                    fn(i) if fn is stream else fn()
            with torch.cuda.graph(g, stream=s):
                for i in range(reps):
                    for k, fn in enumerate(link):
                        fn(i * len(link) + k) if fn is stream else fn()
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                g.replay()
                torch.cuda.synchronize()
                time.sleep(0.002)  # an idle gap between replays
        rows = kernel_events(prof)
        inc, cnt, own = defaultdict(float), defaultdict(int), defaultdict(float)
        end = None
        pos = 0
        for t0, t1, _, _ in rows:
            if end is None or t0 - end > 50:  # a new replay
                end, pos = t0, 0
            label = f"{pos % len(link)}:{link[pos % len(link)].__name__}"
            inc[label] += max(0.0, t1 - end)
            own[label] += t1 - t0
            cnt[label] += 1
            end = max(end, t1)
            pos += 1
        mb = blocks * chunk * 16 / 1e6
        parts = "; ".join(f"{k.split(':')[1]} adds {inc[k] / cnt[k]:.2f} us (own {own[k] / cnt[k]:.1f})"
                          for k in sorted(inc))
        print(f"{name}: {parts}; stream reads {mb:.1f} MB: {mb / 1e6 / (bw / 1e12) * 1e6:.1f} us at copy "
              f"bandwidth", flush=True)


if __name__ == "__main__":
    main()
