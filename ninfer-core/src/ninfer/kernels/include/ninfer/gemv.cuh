// GEMV for batch-1 decode and small verify batches: y[t, n] = sum_k x[t, k] * W[n, k] (+ b[n]).
// Bandwidth-bound: each weight byte is read once per NT tokens, in 16-byte vectors, U loads in flight
// per lane; one warp per output row, WARPS rows per block. x (tiny) is re-read from L1.
#pragma once
#include "common.cuh"

namespace ninfer {

template <typename T, int NT, int U, int WARPS>
__device__ __forceinline__ void gemv(const T *__restrict__ W, const T *__restrict__ x, const T *__restrict__ bias,
                                     T *__restrict__ y, int N, int K, int ntok) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * WARPS + warp;
    const int t0 = blockIdx.y * NT;
    if (n >= N) return;
    const int nt = min(NT, ntok - t0);
    const int KV = K / 8;  // 16-byte vectors per row
    const uint4 *Wr = reinterpret_cast<const uint4 *>(W + (i64)n * K);
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + (i64)t0 * K);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.f;

    int v = lane;
    for (; v + 32 * (U - 1) < KV; v += 32 * U) {
        uint4 w[U];
#pragma unroll
        for (int u = 0; u < U; u++) w[u] = load_stream(Wr + v + 32 * u);
#pragma unroll
        for (int u = 0; u < U; u++) {
            float wf[8];
            unpack8<T>(w[u], wf);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t < nt) {
                    float xf[8];
                    unpack8<T>(__ldg(xr + (i64)t * KV + v + 32 * u), xf);
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[t] = fmaf(wf[i], xf[i], acc[t]);
                }
            }
        }
    }
    for (; v < KV; v += 32) {
        float wf[8];
        unpack8<T>(load_stream(Wr + v), wf);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                float xf[8];
                unpack8<T>(__ldg(xr + (i64)t * KV + v), xf);
#pragma unroll
                for (int i = 0; i < 8; i++) acc[t] = fmaf(wf[i], xf[i], acc[t]);
            }
        }
    }
    const float b = bias ? to_f(bias[n]) : 0.f;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[(i64)(t0 + t) * N + n] = from_f<T>(s + b);
    }
}

}  // namespace ninfer

namespace ninfer {

// Batch-1 GEMV with split K, for matrices with too few rows to keep enough loads in flight (the q/k/v and o
// projections, a down projection of 4096 rows): SPLITK warps share a row, each streaming a contiguous
// K range, and their partial sums meet in shared memory in a fixed order (deterministic).
template <typename T, int U, int WARPS, int SPLITK>
__device__ __forceinline__ void gemv_splitk(const T *__restrict__ W, const T *__restrict__ x,
                                            const T *__restrict__ bias, T *__restrict__ y, int N, int K) {
    constexpr int ROWS = WARPS / SPLITK;
    __shared__ float s_acc[WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * ROWS + warp / SPLITK, part = warp % SPLITK;
    const int KV = K / 8;
    const int per = (KV + SPLITK - 1) / SPLITK;
    const int v0 = part * per, v1 = min(KV, v0 + per);
    float acc = 0.f;
    if (n < N) {
        const uint4 *Wr = reinterpret_cast<const uint4 *>(W + (i64)n * K);
        const uint4 *xr = reinterpret_cast<const uint4 *>(x);
        int v = v0 + lane;
        for (; v + 32 * (U - 1) < v1; v += 32 * U) {
            uint4 w[U];
#pragma unroll
            for (int u = 0; u < U; u++) w[u] = load_stream(Wr + v + 32 * u);
#pragma unroll
            for (int u = 0; u < U; u++) {
                float wf[8], xf[8];
                unpack8<T>(w[u], wf);
                unpack8<T>(__ldg(xr + v + 32 * u), xf);
#pragma unroll
                for (int i = 0; i < 8; i++) acc = fmaf(wf[i], xf[i], acc);
            }
        }
        for (; v < v1; v += 32) {
            float wf[8], xf[8];
            unpack8<T>(load_stream(Wr + v), wf);
            unpack8<T>(__ldg(xr + v), xf);
#pragma unroll
            for (int i = 0; i < 8; i++) acc = fmaf(wf[i], xf[i], acc);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) s_acc[warp] = acc;
    __syncthreads();
    if (part == 0 && lane == 0 && n < N) {
        float s = 0.f;
#pragma unroll
        for (int p = 0; p < SPLITK; p++) s += s_acc[warp + p];
        y[n] = from_f<T>(s + (bias ? to_f(bias[n]) : 0.f));
    }
}

}  // namespace ninfer
