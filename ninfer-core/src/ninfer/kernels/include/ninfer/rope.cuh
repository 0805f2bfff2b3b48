// Rotate-half (NeoX) RoPE on the first rd dims of each head, out of place; the rest of the head is copied.
// Grid (T, Hq + Hk), block D threads. q/k rows may be strided views of a fused qkv output.
#pragma once
#include "common.cuh"

namespace ninfer {

template <typename T>
__device__ __forceinline__ void rope(const T *__restrict__ q, const T *__restrict__ k, T *__restrict__ q_out,
                                     T *__restrict__ k_out, const i64 *__restrict__ positions,
                                     const float *__restrict__ cos_sin, int Hq, int Hk, int D, int rd,
                                     int q_stride, int k_stride) {
    const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    if (d >= D) return;
    const bool is_q = h < Hq;
    const T *src = is_q ? q + (i64)t * q_stride + (i64)h * D : k + (i64)t * k_stride + (i64)(h - Hq) * D;
    T *dst = is_q ? q_out + ((i64)t * Hq + h) * D : k_out + ((i64)t * Hk + (h - Hq)) * D;
    const int half = rd / 2;
    float out;
    if (d < rd) {
        const int j = d < half ? d : d - half;
        const float *cs = cos_sin + positions[t] * rd;
        const float c = cs[j], s = cs[half + j];
        const float x1 = to_f(src[j]), x2 = to_f(src[j + half]);
        out = d < half ? x1 * c - x2 * s : x2 * c + x1 * s;
    } else {
        out = to_f(src[d]);
    }
    dst[d] = from_f<T>(out);
}

}  // namespace ninfer
