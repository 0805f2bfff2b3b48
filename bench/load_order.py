"""Do a warp's global loads return in the order they were issued? A probe for session 17's hypothesis about the int4
burst GEMV (bench/RESULTS.md): if they do, an L1 hit issued after a load that misses to HBM waits for it, so work on
the hit's value cannot overlap the miss.

Each block is one warp, alone on its SM. Every round it loads one fresh line set from HBM (the weights' load form)
and an L1-resident vector (the activations' form), runs a chain of dependent FMAs on the L1 value sized near an HBM
latency, then uses the HBM value. Issued miss-first, the chain can start only when the miss returns if loads return
in order: a round takes about latency + chain. Issued hit-first, or if loads may overtake, about max(latency, chain).
So time(miss first) / time(hit first) near 1 means loads overtake; near 2, they return in order. Kernel times by CUDA
events; nothing depends on where the compiler puts a clock read.

    python bench/load_order.py            (a CUDA GPU; the kernel compiles with NVRTC on first use)
"""

from __future__ import annotations

import torch

SOURCE = r"""
__device__ __forceinline__ uint4 ld_l1(const uint4 *p) {  // activations' load (qgemv.cu qm_load_x)
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {  // weights' load (qgemv.cu qm_load_w)
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// mode 0: the miss issued first, then the hit; 1: the hit first; 2: no miss (the chain alone). chain: dependent FMAs.
extern "C" __global__ void load_order(const uint4 *far, const uint4 *near, unsigned *sink, int mode, int rounds,
                                      int chain) {
    const int lane = threadIdx.x;
    unsigned s = ld_l1(near + lane).x;  // near's four lines now in L1
    for (int r = 0; r < rounds; r++) {
        const uint4 *f = far + ((long long)r * gridDim.x + blockIdx.x) * 32 + lane;  // 512 fresh bytes a round
        const uint4 *h = near + ((lane + r + 1) & 31);  // an L1 hit, at an address the previous round did not read
        uint4 hit, miss = make_uint4(0, 0, 0, 0);
        if (mode == 0) {
            miss = ld_stream(f);
            hit = ld_l1(h);
        } else if (mode == 1) {
            hit = ld_l1(h);
            miss = ld_stream(f);
        } else {
            hit = ld_l1(h);
        }
        float a = __uint_as_float(((hit.x ^ hit.y ^ hit.z ^ hit.w) & 0x007FFFFFu) | 0x3F800000u);
#pragma unroll 1
        for (int i = 0; i < chain; i++) a = fmaf(a, 0.9999f, 1e-4f);
        s += __float_as_uint(a) + (miss.x ^ miss.y ^ miss.z ^ miss.w);
    }
    sink[blockIdx.x * 32 + lane] = s;
}
"""


def main():
    from ninfer.kernels.launch import Module
    from ninfer.kernels.nvrtc import compile_cubin

    dev = torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(dev)
    cubin, _ = compile_cubin(SOURCE, "ninfer_load_order", f"sm_{major}{minor}", progress=False)
    kernel = Module(cubin, dev, label="load_order")["load_order"]
    blocks, rounds = torch.cuda.get_device_properties(dev).multi_processor_count, 256
    near = torch.randint(0, 1 << 30, (32 * 4,), dtype=torch.int32, device="cuda")
    sink = torch.empty(blocks * 32, dtype=torch.int32, device="cuda")
    print(f"GPU: {torch.cuda.get_device_name()}; {blocks} blocks of one warp, {rounds} rounds of one 512-byte HBM load "
          "and one L1 hit each; microseconds a round (median of 5)")
    print("| FMA chain | miss first | hit first | no miss (chain alone) | miss first / hit first |\n|---:|---:|---:|---:|---:|")
    for chain in (0, 64, 128, 256, 512):
        us = {}
        for mode in (0, 1, 2):
            times = []
            for _ in range(5):
                far = torch.randint(0, 1 << 30, (rounds * blocks * 32 * 4,), dtype=torch.int32, device="cuda")
                torch.empty(256 << 20, dtype=torch.uint8, device="cuda").zero_()  # push `far` out of L2
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                kernel((blocks,), (32,), far, near, sink, mode, rounds, chain)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / rounds)
            us[mode] = sorted(times)[2]
        print(f"| {chain} | {us[0]:.3f} | {us[1]:.3f} | {us[2]:.3f} | {us[0] / us[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
