// The Gated DeltaNet layer's decode conv + gates as a one-token GEMV's epilogue, shared by the dense GEMV
// (gemv.cuh: gemv_gdn_in_*) and the quantised one (ninfer/quant/kernels/qgemv.cu: qmv1g_*).
#pragma once
#include "common.cuh"

namespace ninfer {

// The Gated DeltaNet layer's decode input side as the epilogue of its one-token projection GEMV: W's rows are
// [q|k|v (C) | z (Z) | b (H) | a (H)]. Each output is first rounded to T (the projection's output, as the
// unfused ops see it), then: a q|k|v channel runs the causal conv update + SiLU (taps [C, 4] in T, window
// [C, 3] fp32 updated in place: each channel has one owner, so no other thread reads it), z is stored as is,
// b becomes beta = sigmoid(b) (in T) and a the log-decay g = -exp(A_log) softplus(a + dt_bias) (fp32).
// y is [1, C + Z]. Exactly ninfer.reference.gdn.gdn_in_proj's arithmetic after the GEMV.
template <typename T>
struct GdnInEpilogue {
    T *y;
    const T *conv_w;
    float *conv_state;
    const float *A_log, *dt_bias;
    float *g;
    T *beta;
    int C, Z, H;
    __device__ __forceinline__ void operator()(int, int n, float acc) const {
        const float val = to_f(from_f<T>(acc));
        if (n < C) {
            float win[4];
#pragma unroll
            for (int i = 0; i < 3; i++) win[i] = conv_state[(i64)n * 3 + i];
            win[3] = val;
            float a = 0.f;
#pragma unroll
            for (int i = 0; i < 4; i++) a += win[i] * to_f(conv_w[(i64)n * 4 + i]);
            y[n] = from_f<T>(a / (1.f + expf(-a)));
#pragma unroll
            for (int i = 0; i < 3; i++) conv_state[(i64)n * 3 + i] = win[i + 1];
        } else if (n < C + Z) {
            y[n] = from_f<T>(acc);
        } else if (n < C + Z + H) {
            beta[n - C - Z] = from_f<T>(1.f / (1.f + expf(-val)));
        } else {
            const int h = n - C - Z - H;
            const float xx = val + dt_bias[h];
            g[h] = -expf(A_log[h]) * (xx > 20.f ? xx : log1pf(expf(xx)));
        }
    }
};

}  // namespace ninfer
