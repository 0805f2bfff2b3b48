// GEMV for batch-1 decode and small verify batches: y[t, n] = sum_k x[t, k] * W[n, k] (+ b[n]).
// Bandwidth-bound: each weight byte is read once per NT tokens, in 16-byte vectors, U loads in flight
// per lane; one warp per output row, WARPS rows per block. x (tiny) is re-read from L1.
//
// NINFER_GEMV_NEXT (a backend's tuning macro, default 0): at one token, a lane loads its next round of U vectors
// into a second register set before it uses the current one. Without it ptxas interleaves a round's loads with
// the FMAs that consume them (cuobjdump: the third load of a round issues only after the first load's data has
// arrived), so a lane has about two loads in flight, not U. Same summation order either way (bitwise equal).
#pragma once
#include "common.cuh"
#include "gdn_in_epilogue.cuh"

#ifndef NINFER_GEMV_NEXT
#define NINFER_GEMV_NEXT 0
#endif
// NINFER_GEMV_PRE: the one-token GEMVs with the next round in flight (gemv_rows, gemv_silu2) load their first round
// of weights into registers before the PDL wait (2: their first two rounds), while the kernel before them runs and
// HBM is mostly idle; 0: they only ask L2 for it there. Weights are never written, so reading them before the wait
// is safe. H200, Llama-3-8B decode at 512: 1 gave 0.844 of copy bandwidth against 0.822 (bench/RESULTS.md,
// 2026-12-04 session 15).
#ifndef NINFER_GEMV_PRE
#define NINFER_GEMV_PRE 1
#endif

namespace ninfer {

// One round of a one-token row stream: U vectors of W (in registers) against x at vector offset v, into acc.
template <typename T, int U>
__device__ __forceinline__ void gemv_round(const uint4 (&w)[U], const uint4 *__restrict__ xr, int v, float &acc) {
#pragma unroll
    for (int u = 0; u < U; u++) {
        float wf[8], xf[8];
        unpack8<T>(w[u], wf);
        unpack8<T>(__ldg(xr + v + 32 * u), xf);
#pragma unroll
        for (int i = 0; i < 8; i++) acc = fmaf(wf[i], xf[i], acc);
    }
}

// Rounds of U vectors from lane's v to the last full round below v1, the next round in flight, the first round
// already in w (gemv_rounds_next loads it; NINFER_GEMV_PRE: loaded before the PDL wait), the second in nx where
// loaded (then true); v + 32 (U - 1) < v1.
template <typename T, int U>
__device__ __forceinline__ int gemv_rounds_from(const uint4 *__restrict__ Wr, const uint4 *__restrict__ xr, int v,
                                                int v1, float &acc, uint4 (&w)[U], uint4 (&nx)[U], bool loaded) {
    for (; v + 32 * (U - 1) < v1; v += 32 * U) {
        if (v + 32 * (2 * U - 1) < v1 && !loaded) {
#pragma unroll
            for (int u = 0; u < U; u++) nx[u] = load_stream(Wr + v + 32 * (U + u));
        }
        gemv_round<T, U>(w, xr, v, acc);
#pragma unroll
        for (int u = 0; u < U; u++) w[u] = nx[u];
        loaded = false;
    }
    return v;
}

// Rounds of U vectors from lane's v to the last full round below v1, the next round in flight (NINFER_GEMV_NEXT);
// returns the v where the single-vector tail starts.
template <typename T, int U>
__device__ __forceinline__ int gemv_rounds_next(const uint4 *__restrict__ Wr, const uint4 *__restrict__ xr, int v,
                                                int v1, float &acc) {
    if (v + 32 * (U - 1) >= v1) return v;
    uint4 w[U], nx[U];
#pragma unroll
    for (int u = 0; u < U; u++) w[u] = load_stream(Wr + v + 32 * u);
    return gemv_rounds_from<T, U>(Wr, xr, v, v1, acc, w, nx, false);
}

// What a decode GEMV does with a finished output y[t, n] = acc: the plain store (plus the bias), or a fused
// epilogue (GdnInEpilogue, gdn_in_epilogue.cuh). Called by one lane per output.
template <typename T>
struct GemvStore {
    T *y;
    const T *bias;
    int N;
    __device__ __forceinline__ void operator()(int t, int n, float acc) const {
        y[(i64)t * N + n] = from_f<T>(acc + (bias ? to_f(bias[n]) : 0.f));
    }
};

template <typename T, int NT, int U, int WARPS, typename Epi>
__device__ __forceinline__ void gemv(const T *__restrict__ W, const T *__restrict__ x, const Epi &epi, int N, int K,
                                     int ntok) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * WARPS + warp;
    const int t0 = blockIdx.y * NT;
    if (n >= N) return;
    const int nt = min(NT, ntok - t0);
    const int KV = K / 8;  // 16-byte vectors per row
    const uint4 *Wr = reinterpret_cast<const uint4 *>(W + (i64)n * K);
#pragma unroll
    for (int u = 0; u < U; u++)  // the weights' first loads, while the previous kernel finishes
        if (lane + 32 * u < KV) prefetch_l2(Wr + lane + 32 * u);
    pdl_stream_enter();
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + (i64)t0 * K);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.f;

    int v = lane;
    if constexpr (NT == 1 && NINFER_GEMV_NEXT) v = gemv_rounds_next<T, U>(Wr, xr, v, KV, acc[0]);
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
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = warp_sum(acc[t]);
        if (lane == 0 && t < nt) epi(t0 + t, n, s);
    }
}

template <typename T, int NT, int U, int WARPS>
__device__ __forceinline__ void gemv(const T *__restrict__ W, const T *__restrict__ x, const T *__restrict__ bias,
                                     T *__restrict__ y, int N, int K, int ntok) {
    gemv<T, NT, U, WARPS>(W, x, GemvStore<T>{y, bias, N}, N, K, ntok);
}

}  // namespace ninfer

namespace ninfer {

// Batch-1 GEMV with split K, for matrices with too few rows to keep enough loads in flight (the q/k/v and o
// projections, a down projection of 4096 rows): SPLITK warps share a row, each streaming a contiguous
// K range, and their partial sums meet in shared memory in a fixed order (deterministic).
//
// R rows a warp (gemv_rows, the form of gemv_splitk generalised; kept apart so that the split-K kernels keep
// their code): a warp streams R adjacent rows' K ranges together, U loads
// of each row a round, the next round in flight (NEXT) and each activation vector read once for the R rows. On
// the H200, R = 2, U = 2 with the next round in flight streams the 4K-17K x 4K-6K decode matrices at 0.72-0.91
// of copy bandwidth against 0.59-0.84 for one row a warp (an RMSNorm between GEMVs, as in a layer; session 7's
// call 4: bench/gemv_lab.py --gap, bench/RESULTS.md 2026-12-03
// session 7). A row's sum has the same order for every R, U and NEXT: lane order over its vectors, the warp's
// shuffle tree, then the SPLITK parts in order; only SPLITK changes the bits.
template <typename T, int U, int WARPS, int SPLITK, int R, bool NEXT, typename Epi>
__device__ __forceinline__ void gemv_rows(const T *__restrict__ W, const T *__restrict__ x, const Epi &epi, int N,
                                          int K) {
    constexpr int GROUPS = WARPS / SPLITK;  // row groups (R rows each) per block
    __shared__ float s_acc[WARPS][R];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n0 = (blockIdx.x * GROUPS + warp / SPLITK) * R, part = warp % SPLITK;
    const int KV = K / 8;
    const int per = (KV + SPLITK - 1) / SPLITK;
    const int v0 = part * per, v1 = min(KV, v0 + per);
    const uint4 *Wr[R];
#pragma unroll
    for (int r = 0; r < R; r++) Wr[r] = reinterpret_cast<const uint4 *>(W + (i64)min(n0 + r, N - 1) * K);
    // The weights' first round (NINFER_GEMV_PRE 2 with NEXT: the first two), while the previous kernel finishes:
    // into registers (NINFER_GEMV_PRE) or asked of L2.
    uint4 w[R][U], nx[R][U];
    const bool rounds = n0 < N && v0 + lane + 32 * (U - 1) < v1;
    const bool pre2 = NINFER_GEMV_PRE >= 2 && NEXT && n0 < N && v0 + lane + 32 * (2 * U - 1) < v1;
    if (NINFER_GEMV_PRE && rounds) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int u = 0; u < U; u++) w[r][u] = load_stream(Wr[r] + v0 + lane + 32 * u);
        if (pre2) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int u = 0; u < U; u++) nx[r][u] = load_stream(Wr[r] + v0 + lane + 32 * (U + u));
        }
    } else if (!NINFER_GEMV_PRE && n0 < N) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (v0 + lane + 32 * u < v1) prefetch_l2(Wr[r] + v0 + lane + 32 * u);
    }
    pdl_stream_enter();
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.f;
    if (n0 < N) {
        const uint4 *xr = reinterpret_cast<const uint4 *>(x);
        int v = v0 + lane;
        auto use = [&](const uint4 (&w)[R][U], int vv) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                float xf[8];
                unpack8<T>(__ldg(xr + vv + 32 * u), xf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    unpack8<T>(w[r][u], wf);
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r] = fmaf(wf[i], xf[i], acc[r]);
                }
            }
        };
        if (rounds) {
            if (!NINFER_GEMV_PRE) {
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int u = 0; u < U; u++) w[r][u] = load_stream(Wr[r] + v + 32 * u);
            }
            bool loaded = pre2;  // nx already holds the next round
            for (; v + 32 * (U - 1) < v1; v += 32 * U) {
                const bool more = v + 32 * (2 * U - 1) < v1;
                if (NEXT && more && !loaded) {
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int u = 0; u < U; u++) nx[r][u] = load_stream(Wr[r] + v + 32 * (U + u));
                }
                use(w, v);
                if (more) {
#pragma unroll
                    for (int r = 0; r < R; r++)
#pragma unroll
                        for (int u = 0; u < U; u++) w[r][u] = NEXT ? nx[r][u] : load_stream(Wr[r] + v + 32 * (U + u));
                }
                loaded = false;
            }
        }
        for (; v < v1; v += 32) {
            float xf[8];
            unpack8<T>(__ldg(xr + v), xf);
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wf[8];
                unpack8<T>(load_stream(Wr[r] + v), wf);
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r] = fmaf(wf[i], xf[i], acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
    if constexpr (SPLITK == 1) {
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane == r && n0 + r < N) epi(0, n0 + r, acc[r]);
        return;
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) s_acc[warp][r] = acc[r];
    }
    __syncthreads();
    if (part == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (lane == r && n0 + r < N) {
                float s = 0.f;
#pragma unroll
                for (int p = 0; p < SPLITK; p++) s += s_acc[warp + p][r];
                epi(0, n0 + r, s);
            }
        }
    }
}

template <typename T, int U, int WARPS, int SPLITK, typename Epi>
__device__ __forceinline__ void gemv_splitk(const T *__restrict__ W, const T *__restrict__ x, const Epi &epi, int N,
                                            int K) {
    constexpr int ROWS = WARPS / SPLITK;
    __shared__ float s_acc[WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * ROWS + warp / SPLITK, part = warp % SPLITK;
    const int KV = K / 8;
    const int per = (KV + SPLITK - 1) / SPLITK;
    const int v0 = part * per, v1 = min(KV, v0 + per);
    if (n < N) {
#pragma unroll
        for (int u = 0; u < U; u++)  // the weights' first loads, while the previous kernel finishes
            if (v0 + lane + 32 * u < v1) prefetch_l2(W + (i64)n * K + 8 * (v0 + lane + 32 * u));
    }
    pdl_stream_enter();
    float acc = 0.f;
    if (n < N) {
        const uint4 *Wr = reinterpret_cast<const uint4 *>(W + (i64)n * K);
        const uint4 *xr = reinterpret_cast<const uint4 *>(x);
        int v = v0 + lane;
        if constexpr (NINFER_GEMV_NEXT) v = gemv_rounds_next<T, U>(Wr, xr, v, v1, acc);
        for (; v + 32 * (U - 1) < v1; v += 32 * U) {
            uint4 w[U];
#pragma unroll
            for (int u = 0; u < U; u++) w[u] = load_stream(Wr + v + 32 * u);
            gemv_round<T, U>(w, xr, v, acc);
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
        epi(0, n, s);
    }
}

template <typename T, int U, int WARPS, int SPLITK>
__device__ __forceinline__ void gemv_splitk(const T *__restrict__ W, const T *__restrict__ x,
                                            const T *__restrict__ bias, T *__restrict__ y, int N, int K) {
    gemv_splitk<T, U, WARPS, SPLITK>(W, x, GemvStore<T>{y, bias, N}, N, K);
}


}  // namespace ninfer

namespace ninfer {

// ---------------------------------------------------------------------------------------------------------
// Tensor-core GEMV for 1..16 tokens (decode and speculative verify): y[t, n] = sum_k x[t, k] * W[n, k].
//
// The weight rows are the M side of mma.sync m16n8k16 (fp32 accumulate), the tokens the N side (one n-tile
// of 8 tokens, two for up to 16). No shared-memory staging: the reduction over k may visit k in any order as
// long as A and B agree, so lane (g = lane / 4, q = lane % 4) loads 16 bytes (8 values) of weight rows g and
// g + 8 and of token g at the same k offset 32 c + 8 q of chunk c, and those three vectors are exactly its A
// and B fragments for two k16 steps. The weights are streamed once with U chunks (2 MT 16-byte loads per lane
// each) in flight; x (at most 16 x K) is read through L1.
//
// Batch invariance: every output (n, t) is accumulated in an order that depends only on N, K and the split
// KSG chosen from them: warp w of block (m, s) sums chunks [c0, c1) of k-slice s * WARPS + w in ascending
// order, the block sums its WARPS warps in order, and, for KSG > 1, the last block of row block m to finish
// sums the KSG slices in order. The MMA computes each column from that column alone, so column t of a
// T-token call is bitwise the result of a 1-token call on x[t] (tested: tests/gpu/test_ops.py).
//
// SILU: W is [2I, K] = [gate | up] rows; half of a warp's m-tiles are gate rows, half the matching up rows,
// and the epilogue stores silu(g) * u with g and u rounded to T first, so y equals silu_mul(linear(x, W))
// bitwise (the gate and up values are accumulated exactly as the plain kernel accumulates those rows).
// ---------------------------------------------------------------------------------------------------------

// 16 bytes of weights, streamed past L1, or zeros where !ok (one predicated load, no branch).
__device__ __forceinline__ uint4 load_stream_if(const uint4 *p, bool ok) {
    uint4 v;
#if defined(NINFER_L2_PREFETCH_256B) && __CUDA_ARCH__ >= 800
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\t"
        "mov.b32 %3, 0;\n\t@p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)ok));
#else
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\t"
        "mov.b32 %3, 0;\n\t@p ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)ok));
#endif
    return v;
}

// cp.async of 16 bytes (sz = 16) or zeros (sz = 0) into shared memory: weights past L1 (.cg, with the L2
// prefetch hint where the backend asks for it), activations through L1 (.ca).
__device__ __forceinline__ void cp_async_stream(void *dst, const void *src, int sz) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
#if defined(NINFER_L2_PREFETCH_256B)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(sz) : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(sz) : "memory");
#endif
#endif
}

__device__ __forceinline__ void cp_async_cached(void *dst, const void *src, int sz) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(sz) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

template <typename T> struct is_half { static constexpr bool value = false; };
template <> struct is_half<__half> { static constexpr bool value = true; };

// d += A (16x16) * B (16x8), A rows g / g+8 at k (2q, 2q+1) in a0 / a1 and (2q+8, 2q+9) in a2 / a3, B column g
// at k (2q, 2q+1) in b0 and (2q+8, 2q+9) in b1. NINFER_MMA_K8 (Turing, fp16 only) does it as two m16n8k8.
template <typename T>
__device__ __forceinline__ void mma_k16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1) {
#if defined(NINFER_MMA_K8)
    static_assert(sizeof(T) == 2, "fp16 only");
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a2), "r"(a3), "r"(b1));
#else
    if constexpr (sizeof(T) == 2 && !is_half<T>::value) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
#endif
}

// The stored value of output (n, t) from its fp32 sums: plain: v (+ bias); SILU: silu(g) * u of the sums of
// gate row n and up row I + n, each rounded to T as the unfused GEMV stores them (silu_mul's arithmetic).
template <typename T, bool SILU>
__device__ __forceinline__ T gemv_out(float v, float u, const T *__restrict__ bias, int n) {
    if constexpr (SILU) {
        const float g = to_f(from_f<T>(v)), up = to_f(from_f<T>(u));
        return from_f<T>(g / (1.f + expf(-g)) * up);
    } else {
        return from_f<T>(bias ? v + to_f(bias[n]) : v);
    }
}

// Sum of the KSG partials of output (n, t) in slice order, then its stored value. part: [KSG, ntok, N] fp32
// (N the weight's rows; SILU: gate row n, up row I + n). Written by other blocks: read through L2.
template <typename T, bool SILU>
__device__ __forceinline__ void gemv_finish(const float *__restrict__ part, const T *__restrict__ bias,
                                            T *__restrict__ y, int N, int ntok, int ksg, int n, int t) {
    const int I = SILU ? N / 2 : N;
    float v = __ldcg(part + (i64)t * N + n), u = 0.f;
    if (SILU) u = __ldcg(part + (i64)t * N + I + n);
    for (int s = 1; s < ksg; s++) {
        v += __ldcg(part + ((i64)s * ntok + t) * N + n);
        if (SILU) u += __ldcg(part + ((i64)s * ntok + t) * N + I + n);
    }
    y[(i64)t * I + n] = gemv_out<T, SILU>(v, u, bias, n);
}

template <typename T, int MT, int NTILE, int U, int WARPS, bool SILU>
__device__ __forceinline__ void gemv_mma(const T *__restrict__ W, const T *__restrict__ x,
                                         const T *__restrict__ bias, T *__restrict__ y, float *__restrict__ part,
                                         int *__restrict__ counters, int N, int K, int ntok, int ksg) {
    static_assert(!SILU || MT % 2 == 0, "SILU pairs gate and up tiles");
    constexpr int HALF = SILU ? MT / 2 : MT;   // m-tiles of output rows per warp
    constexpr int ROWS = 16 * HALF;            // output rows per block
    constexpr int NC = 8 * NTILE;              // token columns
    __shared__ float red[WARPS][MT][16][NC];
    __shared__ int s_last;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const int m = blockIdx.x, s = blockIdx.y;
    const int I = SILU ? N / 2 : N;            // output rows
    const int KV = K / 8;                      // 16-byte vectors per row

    const uint4 *wp[MT][2];
#pragma unroll
    for (int i = 0; i < MT; i++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int local = m * ROWS + 16 * (i % HALF) + g + 8 * h;
            const int row = min(local, I - 1) + (SILU && i >= HALF ? I : 0);  // rows past the end: loaded, unused
            wp[i][h] = reinterpret_cast<const uint4 *>(W + (i64)row * K);
        }
    }
    const uint4 *xp[NTILE];
    bool tok[NTILE];
#pragma unroll
    for (int j = 0; j < NTILE; j++) {
        tok[j] = 8 * j + g < ntok;
        xp[j] = reinterpret_cast<const uint4 *>(x + (i64)min(8 * j + g, ntok - 1) * K);
    }

    const int nch = (K + 31) / 32, S = ksg * WARPS;
    const int per = (nch + S - 1) / S;
    const int c0 = min(nch, (s * WARPS + warp) * per), c1 = min(nch, c0 + per);

    float acc[MT][NTILE][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTILE; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#if defined(NINFER_MMA_K8) || __CUDA_ARCH__ < 800
    // Registers (Turing): groups of U chunks, plain loads then the mma's; the tail chunk by chunk.
    const int cfull = min(c1, K / 32);
    int c = c0;
    for (; c + U <= cfull; c += U) {
        uint4 w[MT][2][U], xv[NTILE][U];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) w[i][h][u] = load_stream(wp[i][h] + (c + u) * 4 + q);
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int j = 0; j < NTILE; j++) xv[j][u] = tok[j] ? __ldg(xp[j] + (c + u) * 4 + q) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NTILE; j++) {
                    mma_k16<T>(acc[i][j], w[i][0][u].x, w[i][1][u].x, w[i][0][u].y, w[i][1][u].y, xv[j][u].x,
                               xv[j][u].y);
                    mma_k16<T>(acc[i][j], w[i][0][u].z, w[i][1][u].z, w[i][0][u].w, w[i][1][u].w, xv[j][u].z,
                               xv[j][u].w);
                }
    }
    for (; c < c1; c++) {  // same ascending chunk order: the sums do not depend on U
        const int v = c * 4 + q;
        const bool ok = v < KV;  // the last chunk of a K that is no multiple of 32
        uint4 w[MT][2], xv[NTILE];
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) w[i][h] = load_stream_if(wp[i][h] + v, ok);
#pragma unroll
        for (int j = 0; j < NTILE; j++) xv[j] = ok && tok[j] ? __ldg(xp[j] + v) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NTILE; j++) {
                mma_k16<T>(acc[i][j], w[i][0].x, w[i][1].x, w[i][0].y, w[i][1].y, xv[j].x, xv[j].y);
                mma_k16<T>(acc[i][j], w[i][0].z, w[i][1].z, w[i][0].w, w[i][1].w, xv[j].z, xv[j].w);
            }
    }

#else
    // cp.async (sm_80+): each lane copies its own three (or more) 16-byte vectors of a chunk into its own
    // shared-memory slots, U chunks ahead, and reads back only what it copied itself: no barrier, nothing
    // held in registers while in flight. A chunk past K's end is zero-filled (src-size 0).
    extern __shared__ uint4 ring_[];  // [WARPS][U][2 MT + NTILE][32]
    constexpr int SLOTS = 2 * MT + NTILE;
    uint4 *ring = ring_ + warp * (U * SLOTS * 32) + lane;
    auto issue = [&](int c) {
        if (c < c1) {
            const int st = (c - c0) % U, v = c * 4 + q, sz = v < KV ? 16 : 0;
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) cp_async_stream(ring + (st * SLOTS + 2 * i + h) * 32, wp[i][h] + v, sz);
#pragma unroll
            for (int j = 0; j < NTILE; j++)
                if (tok[j]) cp_async_cached(ring + (st * SLOTS + 2 * MT + j) * 32, xp[j] + v, sz);
        }
        cp_async_commit();  // one group per chunk, empty past c1: the wait below counts groups
    };
#pragma unroll
    for (int p = 0; p < U - 1; p++) issue(c0 + p);
    for (int c = c0; c < c1; c++) {
        issue(c + U - 1);  // into the stage chunk c - 1 was read from
        cp_async_wait<U - 1>();
        const int st = (c - c0) % U;
        uint4 w[MT][2], xv[NTILE];
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) w[i][h] = ring[(st * SLOTS + 2 * i + h) * 32];
#pragma unroll
        for (int j = 0; j < NTILE; j++) xv[j] = tok[j] ? ring[(st * SLOTS + 2 * MT + j) * 32] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NTILE; j++) {
                mma_k16<T>(acc[i][j], w[i][0].x, w[i][1].x, w[i][0].y, w[i][1].y, xv[j].x, xv[j].y);
                mma_k16<T>(acc[i][j], w[i][0].z, w[i][1].z, w[i][0].w, w[i][1].w, xv[j].z, xv[j].w);
            }
    }
    cp_async_wait<0>();
#endif

    // C fragment: rows g / g + 8 (elements 0-1 / 2-3), token columns 2q, 2q + 1 of each n-tile
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NTILE; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[warp][i][g + 8 * (e / 2)][8 * j + 2 * q + (e % 2)] = acc[i][j][e];
    __syncthreads();

    const int nout = ROWS * ntok;
    for (int o = threadIdx.x; o < nout; o += WARPS * 32) {
        const int t = o / ROWS, r = o % ROWS, n = m * ROWS + r;
        float v = red[0][r / 16][r % 16][t], u = 0.f;
#pragma unroll
        for (int w = 1; w < WARPS; w++) v += red[w][r / 16][r % 16][t];
        if (SILU) {
            u = red[0][HALF + r / 16][r % 16][t];
#pragma unroll
            for (int w = 1; w < WARPS; w++) u += red[w][HALF + r / 16][r % 16][t];
        }
        if (n >= I) continue;
        if (ksg == 1) {
            y[(i64)t * I + n] = gemv_out<T, SILU>(v, u, bias, n);
        } else {
            part[((i64)s * ntok + t) * N + n] = v;
            if (SILU) part[((i64)s * ntok + t) * N + I + n] = u;
        }
    }
    if (ksg == 1 || counters == nullptr) return;  // no counters: gemv_mma_reduce finishes
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(counters + m, 1) == ksg - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int o = threadIdx.x; o < nout; o += WARPS * 32) {
        const int t = o / ROWS, n = m * ROWS + o % ROWS;
        if (n < I) gemv_finish<T, SILU>(part, bias, y, N, ntok, ksg, n, t);
    }
    if (threadIdx.x == 0) counters[m] = 0;  // zero between launches (graph replays)
}

// Finishes a split launch that ran without counters (captured before any eager call allocated them): the
// same slice-order sums as the last block's. One thread per output.
template <typename T, bool SILU>
__device__ __forceinline__ void gemv_mma_reduce(const float *__restrict__ part, const T *__restrict__ bias,
                                                T *__restrict__ y, int N, int ntok, int ksg) {
    const int I = SILU ? N / 2 : N;
    const i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (i64)I * ntok) return;
    gemv_finish<T, SILU>(part, bias, y, N, ntok, ksg, (int)(o % I), (int)(o / I));
}

}  // namespace ninfer
