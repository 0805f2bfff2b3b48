// The entry points every backend compiles: NINFER_KERNELS(suffix, type) instantiates them for one dtype.
// A backend's kernels.cu sets its tuning macros (below, with defaults) and the dtypes it serves, then
// includes this file. Python (ninfer.kernels.library) knows these names.
#pragma once
#include "attention.cuh"
#include "elementwise.cuh"
#include "fused.cuh"
#include "gdn_gates.cuh"
#include "gdn_kernels.cuh"
#include "gemv.cuh"
#include "kv_quant.cuh"
#include "kvq_prefill.cuh"
#include "norm.cuh"
#include "rope.cuh"

#ifndef NINFER_GEMV_WARPS
#define NINFER_GEMV_WARPS 4  // output rows per block
#endif
#ifndef NINFER_GEMV_UNROLL
#define NINFER_GEMV_UNROLL 4  // 16-byte weight loads in flight per lane at one token
#endif
// Tensor-core GEMV (gemv.cuh: gemv_mma), 1..16 tokens. NINFER_MMA_WARPS is part of the summation order (warps
// of a block split K), the rest only of the speed: m-tiles (16 rows) per warp, chunks (32 k) in flight.
#ifndef NINFER_MMA_WARPS
#define NINFER_MMA_WARPS 4
#endif
#ifndef NINFER_MMA_MT
#define NINFER_MMA_MT 1  // plain GEMV: 16-row m-tiles per warp
#endif
#ifndef NINFER_MMA_MT_SILU
#define NINFER_MMA_MT_SILU 2  // gate_up + SwiGLU: gate and up m-tiles per warp (even)
#endif
#ifndef NINFER_MMA_U8
#define NINFER_MMA_U8 8  // chunks in flight, up to 8 tokens
#endif
#ifndef NINFER_MMA_U16
#define NINFER_MMA_U16 4  // chunks in flight, 9..16 tokens
#endif
#ifndef NINFER_ATTN_WARPS
#define NINFER_ATTN_WARPS 4
#endif
// NINFER_PDL_EARLY_LOADS 1 (the sm90 backend's default; measured in bench/RESULTS.md, 2026-12-03 session 10): decode
// attention (split1, combine, cluster) reads what an earlier step or launch wrote before its pdl_wait (attention.cuh:
// split_pass). Never where a kernel lets the next launch before it waits itself (NINFER_PDL_EARLY_TRIGGER,
// measurements only).
#if !defined(NINFER_PDL_EARLY_LOADS) || defined(NINFER_PDL_EARLY_TRIGGER)
#undef NINFER_PDL_EARLY_LOADS
#define NINFER_PDL_EARLY_LOADS false
#endif
// NINFER_COMBINE_EARLY_TRIGGER 1: the decode attention's combine lets the next kernel launch before it waits for the
// split kernel, so the o projection's GEMV (which reads only its weights before its own wait: gemv.cuh
// NINFER_GEMV_PRE) loads its first round while the split kernel runs, not only during the combine. Safe because
// every kernel that may follow a combine reads before its wait only what no running kernel writes: a GEMV (bf16 or
// quantised) its weights, sigmoid_mul nothing, a decode attention's early loads keys and values of earlier positions
// (docs/CONTRACTS.md, PDL). H200: Llama-3-8B decode +1.3 % at 512 (bench/RESULTS.md, 2026-12-04 session 15).
#ifndef NINFER_COMBINE_EARLY_TRIGGER
#define NINFER_COMBINE_EARLY_TRIGGER 1
#endif
#define NINFER_ATTN_ROWS 8    // query rows sharing one block's K/V loads
#define NINFER_ATTN_CMAX 256  // most keys per split

#define NINFER_GEMV(S, T, NT, U)                                                                        \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_##S##_t##NT(const T *W, const T *x, const T *b, T *y, int N, int K, int ntok) {             \
        ninfer::gemv<T, NT, U, NINFER_GEMV_WARPS>(W, x, b, y, N, K, ntok);                              \
    }

#define NINFER_GEMV_SPLITK(S, T, SK)                                                                    \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_##S##_t1_k##SK(const T *W, const T *x, const T *b, T *y, int N, int K) {                   \
        ninfer::gemv_splitk<T, NINFER_GEMV_UNROLL, NINFER_GEMV_WARPS, SK>(W, x, b, y, N, K);            \
    }

// Two adjacent rows a warp, 2 loads of each a round with the next round in flight (gemv.cuh: gemv_rows), K split
// in SK; used where the backend's tuning sets NINFER_GEMV_PAIRS (ninfer.kernels.gemv.form). At most 64 registers
// (32 warps an SM): left free ptxas took 66-70, and the 4096-row matrices streamed ~0.1 of copy bandwidth slower.
#define NINFER_GEMV_PAIRS(S, T, SK)                                                                     \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32, 32 / NINFER_GEMV_WARPS)        \
        gemv_##S##_t1_r2_k##SK(const T *W, const T *x, const T *b, T *y, int N, int K) {                \
        ninfer::gemv_rows<T, 2, NINFER_GEMV_WARPS, SK, 2, true>(W, x, ninfer::GemvStore<T>{y, b, N}, N, K); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32, 32 / NINFER_GEMV_WARPS)        \
        gemv_gdn_in_##S##_t1_r2_k##SK(NINFER_GEMV_GDN_IN_ARGS(T)) {                                     \
        ninfer::gemv_rows<T, 2, NINFER_GEMV_WARPS, SK, 2, true>(                                        \
            W, x, ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, C, Z, H}, N, K); \
    }

#define NINFER_GEMV_GDN_IN_ARGS(T)                                                                     \
    const T *W, const T *x, T *y, int N, int K, const T *conv_w, float *conv_state, const float *A_log,  \
        const float *dt_bias, float *g, T *beta, int C, int Z, int H
#define NINFER_GEMV_GDN_IN(S, T)                                                                        \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_gdn_in_##S##_t1(NINFER_GEMV_GDN_IN_ARGS(T)) {                                              \
        ninfer::gemv<T, 1, NINFER_GEMV_UNROLL, NINFER_GEMV_WARPS>(                                      \
            W, x, ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, C, Z, H}, N, K, 1); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_gdn_in_##S##_t1_k2(NINFER_GEMV_GDN_IN_ARGS(T)) {                                           \
        ninfer::gemv_splitk<T, NINFER_GEMV_UNROLL, NINFER_GEMV_WARPS, 2>(                               \
            W, x, ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, C, Z, H}, N, K); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_gdn_in_##S##_t1_k4(NINFER_GEMV_GDN_IN_ARGS(T)) {                                           \
        ninfer::gemv_splitk<T, NINFER_GEMV_UNROLL, NINFER_GEMV_WARPS, 4>(                               \
            W, x, ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, C, Z, H}, N, K); \
    }

#define NINFER_GEMV_MMA(NAME, T, MT, NTILE, U, SILU)                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_MMA_WARPS * 32)                                  \
        NAME(const T *W, const T *x, const T *b, T *y, float *part, int *ctr, int N, int K, int ntok, int ksg) { \
        ninfer::pdl_stream_enter();                                                                              \
        ninfer::gemv_mma<T, MT, NTILE, U, NINFER_MMA_WARPS, SILU>(W, x, b, y, part, ctr, N, K, ntok, ksg);   \
    }

#define NINFER_GEMV_MMA_KERNELS(S, T)                                                                   \
    NINFER_GEMV_MMA(gemv_mma_##S##_n8, T, NINFER_MMA_MT, 1, NINFER_MMA_U8, false)                       \
    NINFER_GEMV_MMA(gemv_mma_##S##_n16, T, NINFER_MMA_MT, 2, NINFER_MMA_U16, false)                     \
    NINFER_GEMV_MMA(gemv_mma_silu_##S##_n8, T, NINFER_MMA_MT_SILU, 1, NINFER_MMA_U8, true)              \
    NINFER_GEMV_MMA(gemv_mma_silu_##S##_n16, T, NINFER_MMA_MT_SILU, 2, NINFER_MMA_U16, true)            \
    extern "C" __global__ void gemv_mma_reduce_##S(const float *part, const T *b, T *y, int N, int ntok, int ksg) { \
        ninfer::pdl_enter();                                                                            \
        ninfer::gemv_mma_reduce<T, false>(part, b, y, N, ntok, ksg);                                    \
    }                                                                                                   \
    extern "C" __global__ void gemv_mma_silu_reduce_##S(const float *part, const T *b, T *y, int N, int ntok, \
                                                        int ksg) {                                      \
        ninfer::pdl_enter();                                                                            \
        ninfer::gemv_mma_reduce<T, true>(part, b, y, N, ntok, ksg);                                     \
    }

#define NINFER_ATTN(S, T, D)                                                                            \
    extern "C" __global__ void __launch_bounds__(NINFER_ATTN_WARPS * 32) attention_split_##S##_d##D(    \
        const T *q, const T *kc, const T *vc, const int *bt, const long long *pos, float *po, float *pml, \
        int ntok, int Hq, int Hk, int bs, int S_, int C, int cmin, int q_stride, float scale) {         \
        ninfer::pdl_enter();                                                                            \
        ninfer::attention_split<T, D, NINFER_ATTN_ROWS, NINFER_ATTN_CMAX, NINFER_ATTN_WARPS, false, 2>( \
            q, kc, vc, bt, pos, po, pml, ntok, Hq, Hk, bs, S_, C, cmin, q_stride, scale, nullptr, nullptr); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_ATTN_WARPS * 32) attention_split1_##S##_d##D(   \
        const T *q, const T *kc, const T *vc, const int *bt, const long long *pos, float *po, float *pml, \
        int ntok, int Hq, int Hk, int bs, int S_, int C, int cmin, int q_stride, float scale) {         \
        if (!NINFER_PDL_EARLY_LOADS) ninfer::pdl_enter();                                               \
        ninfer::attention_split<T, D, NINFER_ATTN_ROWS, NINFER_ATTN_CMAX, NINFER_ATTN_WARPS, false, 1,  \
                                NINFER_PDL_EARLY_LOADS>(                                                \
            q, kc, vc, bt, pos, po, pml, ntok, Hq, Hk, bs, S_, C, cmin, q_stride, scale, nullptr, nullptr); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_ATTN_WARPS * 32) attention_split_combine_##S##_d##D( \
        const T *q, const T *kc, const T *vc, const int *bt, const long long *pos, float *po, float *pml, \
        int ntok, int Hq, int Hk, int bs, int S_, int C, int cmin, int q_stride, float scale, T *out,    \
        int *counters) {                                                                                \
        ninfer::pdl_enter();                                                                            \
        ninfer::attention_split<T, D, NINFER_ATTN_ROWS, NINFER_ATTN_CMAX, NINFER_ATTN_WARPS, true>(     \
            q, kc, vc, bt, pos, po, pml, ntok, Hq, Hk, bs, S_, C, cmin, q_stride, scale, out, counters); \
    }

// Decode attention in one launch, a cluster of NC blocks of NW warps per kv head (attention.cuh: attention_cluster;
// sm_90+, the launcher uses it where the module's arch has clusters).
#define NINFER_ATTN_CLUSTER(S, T, D, NC, NW)                                                             \
    extern "C" __global__ void __launch_bounds__(NW * 32) attention_cluster##NC##w##NW##_##S##_d##D(    \
        const T *q, const T *kc, const T *vc, const int *bt, const long long *pos, T *out, int Hq, int Hk, \
        int bs, int q_stride, float scale) {                                                            \
        if (!NINFER_PDL_EARLY_LOADS) ninfer::pdl_enter();                                               \
        ninfer::attention_cluster<T, D, NC, NW, NINFER_PDL_EARLY_LOADS>(q, kc, vc, bt, pos, out, Hq, Hk, bs, \
                                                                       q_stride, scale);                \
    }
#define NINFER_ATTN_CLUSTERS(S, T, D)                                                                   \
    NINFER_ATTN_CLUSTER(S, T, D, 16, 4)                                                                 \
    NINFER_ATTN_CLUSTER(S, T, D, 8, 8)                                                                  \
    NINFER_ATTN_CLUSTER(S, T, D, 16, 8)

#define NINFER_KERNELS(S, T)                                                                            \
    NINFER_GEMV(S, T, 1, NINFER_GEMV_UNROLL)                                                            \
    NINFER_GEMV(S, T, 2, NINFER_GEMV_UNROLL)                                                            \
    NINFER_GEMV(S, T, 4, 4)                                                                             \
    NINFER_GEMV(S, T, 8, 2)                                                                             \
    NINFER_GEMV(S, T, 16, 2)                                                                            \
    NINFER_GEMV_SPLITK(S, T, 2)                                                                         \
    NINFER_GEMV_SPLITK(S, T, 4)                                                                         \
    NINFER_GEMV_GDN_IN(S, T)                                                                            \
    NINFER_GEMV_PAIRS(S, T, 1)                                                                          \
    NINFER_GEMV_PAIRS(S, T, 2)                                                                          \
    NINFER_GEMV_MMA_KERNELS(S, T)                                                                       \
    extern "C" __global__ void __launch_bounds__(1024)                                                  \
        rms_norm_##S(const T *x, const T *w, T *y, int rows, int H, int xs, float eps) {                \
        ninfer::pdl_enter();                                                                            \
        ninfer::rms_norm<T, false, false>(x, nullptr, w, y, rows, H, xs, eps);                          \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024)                                                  \
        rms_norm_zc_##S(const T *x, const T *w, T *y, int rows, int H, int xs, float eps) {             \
        ninfer::pdl_enter();                                                                            \
        ninfer::rms_norm<T, true, false>(x, nullptr, w, y, rows, H, xs, eps);                           \
    }                                                                                                   \
    extern "C" __global__ void rms_norm_gated_##S(const T *x, const T *z, const T *w, T *y, int rows, int H, \
                                                  float eps) {                                          \
        ninfer::pdl_enter();                                                                            \
        ninfer::rms_norm<T, false, true>(x, z, w, y, rows, H, H, eps);                                  \
    }                                                                                                   \
    extern "C" __global__ void rope_##S(const T *q, const T *k, T *qo, T *ko, const long long *pos,     \
                                        const float *cs, int Hq, int Hk, int D, int rd, int qs, int ks) { \
        ninfer::pdl_enter();                                                                            \
        ninfer::rope<T>(q, k, qo, ko, pos, cs, Hq, Hk, D, rd, qs, ks);                                  \
    }                                                                                                   \
    extern "C" __global__ void silu_mul_##S(const T *x, T *y, int ntok, int I) {                        \
        ninfer::pdl_enter();                                                                            \
        ninfer::silu_mul<T>(x, y, ntok, I);                                                             \
    }                                                                                                   \
    extern "C" __global__ void write_kv_##S(const T *k, const T *v, T *kc, T *vc, const long long *slots, \
                                            int row, int ks, int vs) {                                  \
        ninfer::pdl_enter();                                                                            \
        ninfer::write_kv<T>(k, v, kc, vc, slots, row, ks, vs);                                          \
    }                                                                                                   \
    extern "C" __global__ void argmax_##S(const T *logits, long long *out, int V) {                     \
        ninfer::pdl_enter();                                                                            \
        ninfer::argmax<T>(logits, out, V);                                                              \
    }                                                                                                   \
    extern "C" __global__ void argmax_part_##S(const T *logits, float *pv, int *pi, int V, int chunk) {  \
        ninfer::pdl_enter();                                                                            \
        ninfer::argmax_part<T>(logits, pv, pi, V, chunk);                                               \
    }                                                                                                   \
    extern "C" __global__ void sigmoid_mul_##S(const T *x, const T *gate, T *y, int ntok, int H, int D,  \
                                               int gts, int ghs, unsigned char *xq, int2 *xg) {         \
        ninfer::pdl_enter();                                                                            \
        ninfer::sigmoid_mul<T>(x, gate, y, ntok, H, D, gts, ghs, xq, xg);                               \
    }                                                                                                   \
    NINFER_ATTN(S, T, 64)                                                                               \
    NINFER_ATTN(S, T, 128)                                                                              \
    NINFER_ATTN(S, T, 256)                                                                              \
    NINFER_ATTN_CLUSTERS(S, T, 64)                                                                      \
    NINFER_ATTN_CLUSTERS(S, T, 128)                                                                     \
    NINFER_ATTN_CLUSTERS(S, T, 256)                                                                     \
    extern "C" __global__ void attention_combine_##S(const float *po, const float *pml, const long long *pos, \
                                                     T *out, int Hq, int S_, int C, int cmin, int D) {  \
        if (NINFER_COMBINE_EARLY_TRIGGER) ninfer::pdl_trigger();                                        \
        if (!NINFER_PDL_EARLY_LOADS) ninfer::pdl_enter();                                               \
        ninfer::attention_combine<T, NINFER_PDL_EARLY_LOADS>(po, pml, pos, out, Hq, S_, C, cmin, D);    \
    }                                                                                                   \
    extern "C" __global__ void attention_combine_gate_##S(const float *po, const float *pml, const long long *pos, \
                                                          T *out, int Hq, int S_, int C, int cmin, int D,   \
                                                          const T *gate, int gts, int ghs, unsigned char *xq, \
                                                          int2 *xg) {                                       \
        if (NINFER_COMBINE_EARLY_TRIGGER) ninfer::pdl_trigger();                                        \
        if (!NINFER_PDL_EARLY_LOADS) ninfer::pdl_enter();                                               \
        ninfer::attention_combine<T, NINFER_PDL_EARLY_LOADS, true>(po, pml, pos, out, Hq, S_, C, cmin, D, \
                                                                   {gate, gts, ghs, xq, xg});           \
    }                                                                                                   \
    NINFER_FUSED_KERNELS(S, T)                                                                          \
    NINFER_KVQ_KERNELS(S, T)                                                                            \
    NINFER_KVQ_PREFILL_KERNELS(S, T)                                                                    \
    NINFER_GDN_GATES_KERNELS(S, T)                                                                      \
    NINFER_GDN_KERNELS(S, T)                                                                            \
    NINFER_GDN_MMA_KERNELS(S, T)

// dtype-free kernels, once per module
#define NINFER_COMMON_KERNELS()                                                                         \
    extern "C" __global__ void argmax_f32(const float *logits, long long *out, int V) {                 \
        ninfer::pdl_enter();                                                                            \
        ninfer::argmax<float>(logits, out, V);                                                          \
    }                                                                                                   \
    extern "C" __global__ void argmax_part_f32(const float *logits, float *pv, int *pi, int V, int chunk) { \
        ninfer::pdl_enter();                                                                            \
        ninfer::argmax_part<float>(logits, pv, pi, V, chunk);                                           \
    }                                                                                                   \
    extern "C" __global__ void argmax_reduce(const float *pv, const int *pi, long long *out, int nb) {   \
        ninfer::pdl_enter();                                                                            \
        ninfer::argmax_reduce(pv, pi, out, nb);                                                         \
    }                                                                                                   \
    NINFER_GDN_KERNELS(f32, float)
