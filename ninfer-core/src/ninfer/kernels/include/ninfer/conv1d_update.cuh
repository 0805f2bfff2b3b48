// Causal depthwise conv1d + SiLU for decode and verify steps (the Gated DeltaNet input conv), continuing
// from a conv window of the previous K-1 inputs: ninfer.reference.gdn.causal_conv1d_update.
// One thread per channel: it holds the channel's K taps and its window in registers, walks the T new
// tokens in order, and writes the window after the last one. It reads its whole window before writing
// it, so state_out may alias state_in (an in-place update).
#pragma once
#include "common.cuh"

namespace ninfer {

// x: [T, C] with row stride x_stride; w: [C, K]; bias: [C] or null; state_in/out: [C, K-1] fp32;
// y: [T, C] contiguous.
template <typename T, int K>
__device__ __forceinline__ void causal_conv1d_update(const T *__restrict__ x, const T *__restrict__ w,
                                                     const T *__restrict__ bias, const float *state_in,
                                                     T *__restrict__ y, float *state_out, int ntok, int C,
                                                     int x_stride) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float win[K], tap[K];  // win[0..K-2]: the previous inputs, oldest first; win[K-1]: this token's
#pragma unroll
    for (int i = 0; i < K - 1; i++) win[i] = state_in[(i64)c * (K - 1) + i];
#pragma unroll
    for (int i = 0; i < K; i++) tap[i] = to_f(w[(i64)c * K + i]);
    const float b = bias != nullptr ? to_f(bias[c]) : 0.f;
    for (int t = 0; t < ntok; t++) {
        win[K - 1] = to_f(x[(i64)t * x_stride + c]);
        float acc = 0.f;
#pragma unroll
        for (int i = 0; i < K; i++) acc += win[i] * tap[i];
        acc += b;  // the reference adds the bias after the tap sum
        y[(i64)t * C + c] = from_f<T>(acc / (1.f + expf(-acc)));
#pragma unroll
        for (int i = 0; i < K - 1; i++) win[i] = win[i + 1];
    }
#pragma unroll
    for (int i = 0; i < K - 1; i++) state_out[(i64)c * (K - 1) + i] = win[i];
}

}  // namespace ninfer
