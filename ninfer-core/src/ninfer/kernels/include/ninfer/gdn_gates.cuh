// The Gated DeltaNet's per-token gates in one launch (instead of ~6 elementwise torch kernels a layer):
//   g    = -exp(A_log[h]) * softplus(a[t, h] + dt_bias[h])   (fp32, softplus threshold 20 as torch)
//   beta = sigmoid(b[t, h])                                   (in the model dtype, as transformers)
// a, b: [T, H] views with row strides sa / sb (columns contiguous); A_log, dt_bias: fp32 [H].
#pragma once
#include "common.cuh"

namespace ninfer {

template <typename T>
__device__ __forceinline__ void gdn_gates(const T *__restrict__ a, const T *__restrict__ b,
                                          const float *__restrict__ A_log, const float *__restrict__ dt_bias,
                                          float *__restrict__ g, T *__restrict__ beta, int ntok, int H, int sa,
                                          int sb) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ntok * H) return;
    const int t = i / H, h = i % H;
    const float x = to_f(a[(i64)t * sa + h]) + dt_bias[h];
    const float sp = x > 20.f ? x : log1pf(expf(x));
    g[i] = -expf(A_log[h]) * sp;
    const float bv = to_f(b[(i64)t * sb + h]);
    beta[i] = from_f<T>(1.f / (1.f + expf(-bv)));
}

}  // namespace ninfer

#define NINFER_GDN_GATES_KERNELS(S, T)                                                                  \
    extern "C" __global__ void gdn_gates_##S(const T *a, const T *b, const float *A_log, const float *dt_bias, \
                                             float *g, T *beta, int ntok, int H, int sa, int sb) {       \
        ninfer::pdl_enter();                                                                            \
        ninfer::gdn_gates<T>(a, b, A_log, dt_bias, g, beta, ntok, H, sa, sb);                           \
    }
