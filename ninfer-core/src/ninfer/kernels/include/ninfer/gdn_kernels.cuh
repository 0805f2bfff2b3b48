// Entry points of the Gated DeltaNet decode/verify path, instantiated per dtype by kernels.cuh:
// NINFER_GDN_KERNELS(suffix, type). Python (ninfer.kernels.gdn) launches them by these names.
#pragma once
#include "conv1d_update.cuh"
#include "gdn_recurrent.cuh"

#ifndef NINFER_GDN_BV
#define NINFER_GDN_BV 16  // value columns per block of the gated delta rule (48 heads x 8 slices = 384 blocks)
#endif

#define NINFER_GDN_KERNELS(S, T)                                                                        \
    extern "C" __global__ void __launch_bounds__(128) causal_conv1d_update_##S##_k4(                    \
        const T *x, const T *w, const T *bias, const float *state_in, T *y, float *state_out, int ntok,  \
        int C, int x_stride) {                                                                          \
        ninfer::causal_conv1d_update<T, 4>(x, w, bias, state_in, y, state_out, ntok, C, x_stride);      \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_THREADS) gdn_recurrent_##S##_d128(         \
        const T *q, const T *k, const T *v, const float *g, const T *beta, const float *state_in, T *out, \
        float *state_out, float *states, int ntok, int H, int Hk, int q_stride, int k_stride,            \
        int v_stride, int g_stride, int b_stride, float scale, float eps) {                             \
        ninfer::gdn_recurrent<T, 128, 128, NINFER_GDN_BV>(q, k, v, g, beta, state_in, out, state_out,    \
                                                          states, ntok, H, Hk, q_stride, k_stride,      \
                                                          v_stride, g_stride, b_stride, scale, eps);    \
    }
