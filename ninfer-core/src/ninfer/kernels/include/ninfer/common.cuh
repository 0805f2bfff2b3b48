// Shared device helpers for every ninfer backend: dtype conversion, 16-byte vectors, reductions.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace ninfer {

typedef long long i64;

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// 8 half-precision values travel as one 16-byte vector.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4 &v, float *f) {
    const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = to_f(e[i]);
}

template <typename T>
__device__ __forceinline__ uint4 pack8(const float *f) {
    uint4 v;
    T *e = reinterpret_cast<T *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++) e[i] = from_f<T>(f[i]);
    return v;
}

// Weights are read once per token: stream them past L1. Backends for sm_80+ ask for 256-byte L2
// prefetch, which keeps more bytes in flight per load (NINFER_L2_PREFETCH_256B).
__device__ __forceinline__ uint4 load_stream(const uint4 *p) {
#if defined(NINFER_L2_PREFETCH_256B) && __CUDA_ARCH__ >= 800
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
#else
    return __ldg(p);
#endif
}

// Programmatic dependent launch (sm_90+). The launcher (ninfer.kernels.launch) gives ninfer's kernels the
// programmatic-stream-serialization attribute when their module was compiled for sm_90 or newer, so a kernel may
// start while the one before it in the stream still runs. pdl_wait() blocks until that kernel has completed and
// its writes are visible: every kernel calls it before it reads anything an earlier kernel wrote and before its
// first global write (the earlier kernel may still read what it would overwrite). Only constant data (weights)
// may be touched before it. pdl_trigger() lets the next kernel launch now (its blocks then sit in their own
// pdl_wait). Both are no-ops below sm_90 and in a launch without the attribute.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// NINFER_W_EARLY (default 1): the small decode ops (add_rms_norm, rope_write_kv's head norms, gdn_recurrent_gated's
// output norm) load their weights, which no kernel writes, before their PDL wait, so that only the previous kernel's
// outputs are fetched after it. 0 (a bench build): after the wait, as before session 35.
#ifndef NINFER_W_EARLY
#define NINFER_W_EARLY 1
#endif

// The entry of a kernel that touches nothing before waiting: wait, then let the next kernel launch. The next
// kernel's blocks are then resident and waiting when this one completes (a GEMV's blocks ask L2 for their
// first weights meanwhile). NINFER_PDL_EARLY_TRIGGER (measurements only: bench/decode.py --pdl early) triggers
// first, so a short kernel between two GEMVs launches the second during the first one's tail: measured on the
// H200 no faster (bench/RESULTS.md, 2026-12-02, PDL section). Waiting later in a chain is safe either way: a
// kernel completes only after its own wait returned, so each wait also covers every earlier kernel.
__device__ __forceinline__ void pdl_enter() {
#ifdef NINFER_PDL_EARLY_TRIGGER
    pdl_trigger();
    pdl_wait();
#else
    pdl_wait();
    pdl_trigger();
#endif
}

// The entry of a weight-streaming kernel, after its first weight requests: wait, then let the next kernel launch
// (whatever NINFER_PDL_EARLY_TRIGGER says: one GEMV ahead at most, whose prefetched lines stay in L2).
__device__ __forceinline__ void pdl_stream_enter() {
    pdl_wait();
    pdl_trigger();
}

// Ask L2 for a weight line ahead of pdl_wait (sm_90+, where a launch may overlap the previous kernel).
__device__ __forceinline__ void prefetch_l2(const void *p) {
#if __CUDA_ARCH__ >= 900
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// RMSNorm rows that fit hold their row in registers, one read of each input (norm.cuh, fused.cuh).
// NINFER_NORM_TWO_PASS (measurements only: bench/decode.py --norm 2, with the launchers' former block sizes)
// compiles the former loops, which read the row, reduce, then read it again.
#ifdef NINFER_NORM_TWO_PASS
constexpr bool NORM_ONE_PASS = false;
#else
constexpr bool NORM_ONE_PASS = true;
#endif

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the blockDim.x threads of one row (a multiple of 32, at most 1024); `scratch` holds 32 floats
// per row of the block.
__device__ __forceinline__ float row_sum(float v, float *scratch) {
    v = warp_sum(v);
    int nw = blockDim.x / 32;
    if (nw == 1) return v;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    float s = lane < nw ? scratch[lane] : 0.f;
    return warp_sum(s);
}

}  // namespace ninfer
