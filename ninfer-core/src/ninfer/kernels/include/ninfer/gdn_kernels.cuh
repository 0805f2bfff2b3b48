// Entry points of the Gated DeltaNet decode/verify and prefill paths, instantiated per dtype by kernels.cuh:
// NINFER_GDN_KERNELS(suffix, type). Python (ninfer.kernels.gdn) launches them by these names.
#pragma once
#include "conv1d_update.cuh"
#include "gdn_chunked.cuh"
#include "gdn_chunked_mma.cuh"
#include "gdn_recurrent.cuh"

// NINFER_GDN_STATE_L2 (default 1): gdn_recurrent_gated's blocks ask L2 for their head's [128, 128] fp32 state (one
// 128-byte line a thread of 512) before their PDL wait (sm_90+; a prefetch, so right whoever writes the state), and
// read it from L2 once the kernel before has finished. 0: every state read after the wait (bench/whatif.py gdnlate).
#ifndef NINFER_GDN_STATE_L2
#define NINFER_GDN_STATE_L2 1
#endif

#ifndef NINFER_GDN_BV
#define NINFER_GDN_BV 16  // value columns per block of the gated delta rule (48 heads x 8 slices = 384 blocks)
#endif

// the chunked prefill's sequential pass, per value-slice width BV (the launcher picks one)
#define NINFER_GDN_CHUNK_STATE(S, T, BV)                                                                \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_STATE_THREADS) gdn_chunk_state_##S##_d128_v##BV( \
        const T *q, const T *k, const float *W, const float *U, const float *Aqk, const float *Gc,      \
        const float *rq, const float *rk, const float *state_in, T *out, float *state_out, int ntok, int H, \
        int Hk, int q_stride, int k_stride, int NC) {                                                   \
        ninfer::pdl_enter();                                                                                \
        ninfer::gdn_chunk_state<T, 128, BV>(q, k, W, U, Aqk, Gc, rq, rk, state_in, out, state_out, ntok, H, \
                                            Hk, q_stride, k_stride, NC);                                \
    }

#define NINFER_GDN_KERNELS(S, T)                                                                        \
    extern "C" __global__ void __launch_bounds__(128) causal_conv1d_update_##S##_k4(                    \
        const T *x, const T *w, const T *bias, const float *state_in, T *y, float *state_out, int ntok,  \
        int C, int x_stride) {                                                                          \
        ninfer::pdl_enter();                                                                            \
        ninfer::causal_conv1d_update<T, 4>(x, w, bias, state_in, y, state_out, ntok, C, x_stride);      \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_THREADS) gdn_recurrent_##S##_d128(         \
        const T *q, const T *k, const T *v, const float *g, const T *beta, const float *state_in, T *out, \
        float *state_out, float *states, int ntok, int H, int Hk, int q_stride, int k_stride,            \
        int v_stride, int g_stride, int b_stride, float scale, float eps) {                             \
        ninfer::pdl_enter();                                                                             \
        ninfer::gdn_recurrent<T, 128, 128, NINFER_GDN_BV>(q, k, v, g, beta, state_in, out, state_out,    \
                                                          states, ntok, H, Hk, q_stride, k_stride,      \
                                                          v_stride, g_stride, b_stride, scale, eps);    \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_HEAD_THREADS) gdn_recurrent_gated_##S##_d128( \
        const T *q, const T *k, const T *v, const float *g, const T *beta, const float *state_in, const T *z, \
        const T *norm_w, T *out, float *state_out, float *states, int ntok, int H, int Hk, int q_stride,  \
        int k_stride, int v_stride, int g_stride, int b_stride, int z_stride, float scale, float eps,     \
        float norm_eps, unsigned char *xq, int2 *xg) {                                                  \
        if (NINFER_GDN_STATE_L2 && state_in != nullptr) /* the head's state into L2, a line a thread */ \
            ninfer::prefetch_l2(state_in + ((long long)blockIdx.x * 128 * 128 + threadIdx.x * 32));             \
        ninfer::gdn_recurrent_gated<T, 128, 128>(q, k, v, g, beta, state_in, z, norm_w, out, state_out,  \
                                                 states, ntok, H, Hk, q_stride, k_stride, v_stride,     \
                                                 g_stride, b_stride, z_stride, scale, eps, norm_eps, xq, xg); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(128) causal_conv1d_prefill_##S##_k4(                   \
        const T *x, const T *w, const T *bias, const float *state_in, T *y, float *state_out, int ntok, \
        int C, int x_stride) {                                                                          \
        ninfer::pdl_enter();                                                                            \
        ninfer::causal_conv1d_prefill<T, 4>(x, w, bias, state_in, y, state_out, ntok, C, x_stride);     \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_PREP_THREADS, 2) gdn_chunk_prep_##S##_d128(    \
        const T *q, const T *k, const T *v, const float *g, const T *beta, float *W, float *U, float *Aqk, \
        float *Gc, float *rq, float *rk, int ntok, int H, int Hk, int q_stride, int k_stride, int v_stride, \
        int g_stride, int b_stride, float scale, float eps) {                                           \
        ninfer::pdl_enter();                                                                            \
        extern __shared__ __align__(16) unsigned char gdn_chunk_smem[];                                 \
        ninfer::gdn_chunk_prep<T, 128>(gdn_chunk_smem, q, k, v, g, beta, W, U, Aqk, Gc, rq, rk, ntok, H, Hk, \
                                       q_stride, k_stride, v_stride, g_stride, b_stride, scale, eps);   \
    }                                                                                                   \
    NINFER_GDN_CHUNK_STATE(S, T, 16)                                                                    \
    NINFER_GDN_CHUNK_STATE(S, T, 32)

// the state pass on tensor cores, 16-bit dtypes only (an empty kernel below sm_80: the launcher uses it on sm_80+)
#define NINFER_GDN_MMA_KERNELS(S, T)                                                                    \
    extern "C" __global__ void __launch_bounds__(ninfer::GDN_MMA_THREADS, 2) gdn_chunk_state_mma_##S##_d128( \
        const T *q, const T *k, const float *W, const float *U, const float *Aqk, const float *Gc,      \
        const float *rq, const float *rk, const float *state_in, T *out, float *state_out, int ntok, int H, \
        int Hk, int q_stride, int k_stride, int NC) {                                                   \
        ninfer::pdl_enter();                                                                            \
        extern __shared__ __align__(16) unsigned char gdn_mma_smem[];                                   \
        ninfer::gdn_chunk_state_mma<T>(gdn_mma_smem, q, k, W, U, Aqk, Gc, rq, rk, state_in, out, state_out, \
                                       ntok, H, Hk, q_stride, k_stride, NC);                            \
    }
