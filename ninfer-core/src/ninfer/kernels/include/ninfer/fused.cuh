// Fused decode kernels: each replaces two to four small launches of the unfused path, which at batch 1
// are latency-bound (~2 us each on an H200), by one. Semantics are those of ninfer.reference.ops
// (add_rms_norm, rope_write_kv, linear_silu_mul): every intermediate the reference stores in the model
// dtype is rounded to it here too, so the fused and unfused paths compute the same function.
#pragma once
#include "common.cuh"
#include "fixed_point.cuh"
#include "gemv.cuh"

namespace ninfer {

// h = x + r (stored in T), y = rms_norm(h) * w (or * (1 + w)). One block per row, blockDim.x a multiple
// of 32. x, r, h, y: [rows, H] contiguous, H % 8 == 0, 16-byte aligned. A row of at most 4 * blockDim.x
// vectors (the launcher's choice up to H = 32768) is held in registers: x, r and w are read once, all
// loads in flight together, h and y written once (one memory round trip before the reduction instead of a
// loop of them, and no re-read of h after it). Longer rows take the two-pass loop.
//
// xq / xg (not null: one row, H % 128 == 0, the row in registers): y as well in the 16-bit fixed point of the quantised
// one-token GEMV (fixed_point.cuh; 16 threads a group of 128 here), from the stored (rounded) y, so the GEMV sees the
// values the model stores.
//
// The kernel's PDL wait (pdl_enter) is made here: in the one-pass form after the norm weight's loads are issued
// (NINFER_W_EARLY, common.cuh), so only x and r are fetched after the wait.
template <typename T, bool ZERO_CENTRED>
__device__ __forceinline__ void add_rms_norm(const T *__restrict__ x, const T *__restrict__ r,
                                             const T *__restrict__ w, T *__restrict__ y, T *__restrict__ h,
                                             int H, float eps, unsigned char *__restrict__ xq = nullptr,
                                             int2 *__restrict__ xg = nullptr) {
    constexpr int NV = 4;
    __shared__ float scratch[32];
    const int HV = H / 8;
    const i64 off = (i64)blockIdx.x * H;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + off);
    const uint4 *rr = reinterpret_cast<const uint4 *>(r + off);
    const uint4 *wr = reinterpret_cast<const uint4 *>(w);
    uint4 *hr = reinterpret_cast<uint4 *>(h + off);
    uint4 *yr = reinterpret_cast<uint4 *>(y + off);
    if (NORM_ONE_PASS && HV <= NV * (int)blockDim.x) {  // block-uniform
        uint4 xv[NV], rv[NV], wv[NV];
        if (NINFER_W_EARLY) {
#pragma unroll
            for (int j = 0; j < NV; j++) {
                const int v = threadIdx.x + j * blockDim.x;
                if (v < HV) wv[j] = __ldg(wr + v);
            }
        }
        pdl_enter();
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            if (v < HV) {
                xv[j] = xr[v];
                rv[j] = rr[v];
                if (!NINFER_W_EARLY) wv[j] = wr[v];
            }
        }
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            if (v < HV) {
                float a[8], b[8];
                unpack8<T>(xv[j], a);
                unpack8<T>(rv[j], b);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    a[i] = to_f(from_f<T>(a[i] + b[i]));  // the residual stream is stored in T: normalise what is stored
                    ss = fmaf(a[i], a[i], ss);
                }
                xv[j] = pack8<T>(a);  // h, exactly (a holds values representable in T)
                hr[v] = xv[j];
            }
        }
        ss = row_sum(ss, scratch);
        const float rs = rsqrtf(ss / (float)H + eps);
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (v < HV) {
                float g[8];
                unpack8<T>(xv[j], a);
                unpack8<T>(wv[j], g);
#pragma unroll
                for (int i = 0; i < 8; i++) a[i] = a[i] * rs * (ZERO_CENTRED ? 1.f + g[i] : g[i]);
                const uint4 yv = pack8<T>(a);
                yr[v] = yv;
                if (xq != nullptr) unpack8<T>(yv, a);  // the stored values
            }
            if (xq != nullptr && j * (int)blockDim.x < HV) fixed_group16(a, v, v < HV, xq, xg, H);  // block-uniform
        }
        return;
    }
    pdl_enter();
    float ss = 0.f;
    for (int v = threadIdx.x; v < HV; v += blockDim.x) {
        float a[8], b[8];
        unpack8<T>(xr[v], a);
        unpack8<T>(rr[v], b);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            a[i] = to_f(from_f<T>(a[i] + b[i]));
            ss = fmaf(a[i], a[i], ss);
        }
        hr[v] = pack8<T>(a);
    }
    ss = row_sum(ss, scratch);
    const float rs = rsqrtf(ss / (float)H + eps);
    for (int v = threadIdx.x; v < HV; v += blockDim.x) {
        float a[8], g[8];
        unpack8<T>(hr[v], a);  // written above by this same thread
        unpack8<T>(wr[v], g);
#pragma unroll
        for (int i = 0; i < 8; i++) a[i] = a[i] * rs * (ZERO_CENTRED ? 1.f + g[i] : g[i]);
        yr[v] = pack8<T>(a);
    }
}

// Per-head q/k RMSNorm (when qn/kn are given), rotate-half RoPE on the first rd dims, the rotated q to
// q_out [T, Hq, D], the rotated k and the untouched v straight into the paged caches at slots[t].
// Grid (T, Hq + Hk), block D threads (D % 32 == 0). q rows at (q_ts, q_hs) strides (a view of the qkv
// output, possibly gated), k and v rows at k_ts / v_ts with heads D apart.
template <typename T>
__device__ __forceinline__ void rope_write_kv(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                                              const T *__restrict__ qn, const T *__restrict__ kn,
                                              const i64 *__restrict__ positions, const float *__restrict__ cos_sin,
                                              T *__restrict__ q_out, T *__restrict__ k_cache, T *__restrict__ v_cache,
                                              const i64 *__restrict__ slots, int Hq, int Hk, int D, int rd, int q_ts,
                                              int q_hs, int k_ts, int v_ts, float eps, int zero_centred) {
    __shared__ float s_x[1024];
    __shared__ float scratch[32];
    const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    const bool is_q = h < Hq;
    const int hk = h - Hq;
    const T *src = is_q ? q + (i64)t * q_ts + (i64)h * q_hs : k + (i64)t * k_ts + (i64)hk * D;
    const T *nw = is_q ? qn : kn;
    float gw = 0.f;  // the head norm's weight (NINFER_W_EARLY: before the PDL wait)
    if (NINFER_W_EARLY && nw != nullptr) gw = to_f(__ldg(nw + d));
    pdl_enter();
    float xv = to_f(src[d]);
    if (nw != nullptr) {  // block-uniform: every thread reaches the reduction
        const float ss = row_sum(xv * xv, scratch);
        const float g = NINFER_W_EARLY ? gw : to_f(nw[d]);
        xv = to_f(from_f<T>(xv * rsqrtf(ss / (float)D + eps) * (zero_centred ? 1.f + g : g)));
    }
    s_x[d] = xv;
    __syncthreads();
    float out = xv;
    const int half = rd / 2;
    if (d < rd) {
        const int j = d < half ? d : d - half;
        const float *cs = cos_sin + positions[t] * rd;
        const float c = cs[j], s = cs[half + j];
        const float x1 = s_x[j], x2 = s_x[j + half];
        out = d < half ? x1 * c - x2 * s : x2 * c + x1 * s;
    }
    if (is_q) {
        q_out[((i64)t * Hq + h) * D + d] = from_f<T>(out);
    } else {
        const i64 dst = (slots[t] * Hk + hk) * D + d;
        k_cache[dst] = from_f<T>(out);
        v_cache[dst] = v[(i64)t * v_ts + (i64)hk * D + d];
    }
}

// Batch-1 gate_up GEMV with SwiGLU in its epilogue: W is [2I, K] = [gate | up] rows, y[n] =
// silu(W[n] . x) * (W[I + n] . x) for n < I. One warp per output streams its gate and up rows together
// (U/2 16-byte loads of each in flight per lane, as many bytes as the plain GEMV keeps).
template <typename T, int U, int WARPS>
__device__ __forceinline__ void gemv_silu(const T *__restrict__ W, const T *__restrict__ x, T *__restrict__ y,
                                          int I, int K) {
    constexpr int H2 = U / 2 > 0 ? U / 2 : 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * WARPS + warp;
    if (n >= I) return;
    const int KV = K / 8;
    const uint4 *Wg = reinterpret_cast<const uint4 *>(W + (i64)n * K);
    const uint4 *Wu = reinterpret_cast<const uint4 *>(W + (i64)(n + I) * K);
    const uint4 *xr = reinterpret_cast<const uint4 *>(x);
#pragma unroll
    for (int j = 0; j < H2; j++)  // the weights' first loads, while the previous kernel finishes
        if (lane + 32 * j < KV) {
            prefetch_l2(Wg + lane + 32 * j);
            prefetch_l2(Wu + lane + 32 * j);
        }
    pdl_stream_enter();
    float ag = 0.f, au = 0.f;
    int v = lane;
    for (; v + 32 * (H2 - 1) < KV; v += 32 * H2) {
        uint4 g[H2], u[H2];
#pragma unroll
        for (int j = 0; j < H2; j++) {
            g[j] = load_stream(Wg + v + 32 * j);
            u[j] = load_stream(Wu + v + 32 * j);
        }
#pragma unroll
        for (int j = 0; j < H2; j++) {
            float gf[8], uf[8], xf[8];
            unpack8<T>(g[j], gf);
            unpack8<T>(u[j], uf);
            unpack8<T>(__ldg(xr + v + 32 * j), xf);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                ag = fmaf(gf[i], xf[i], ag);
                au = fmaf(uf[i], xf[i], au);
            }
        }
    }
    for (; v < KV; v += 32) {
        float gf[8], uf[8], xf[8];
        unpack8<T>(load_stream(Wg + v), gf);
        unpack8<T>(load_stream(Wu + v), uf);
        unpack8<T>(__ldg(xr + v), xf);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            ag = fmaf(gf[i], xf[i], ag);
            au = fmaf(uf[i], xf[i], au);
        }
    }
    ag = warp_sum(ag);
    au = warp_sum(au);
    if (lane == 0) {
        const float g = to_f(from_f<T>(ag)), u = to_f(from_f<T>(au));  // the unfused GEMV stores both in T
        y[n] = from_f<T>(g / (1.f + expf(-g)) * u);
    }
}

// The same output, y[n] = silu(W[n] . x) * (W[I + n] . x), with the gate and the up row of an output on two warps
// of a block (each one row stream, 2 loads a round and the next round in flight: gemv.cuh: gemv_rounds_next),
// their sums met in shared memory: twice the warps of gemv_silu, each with its loads issued a round ahead
// (bench/gemv_lab.py on the H200: one row a warp in that form streams the 27B's gate_up at 0.98 of copy bandwidth
// against 0.93-0.95 for gemv_silu). Each row's sum has gemv_silu's order (bitwise the same output).
template <typename T, int WARPS>
__device__ __forceinline__ void gemv_silu2(const T *__restrict__ W, const T *__restrict__ x, T *__restrict__ y,
                                           int I, int K) {
    constexpr int U = 2;
    static_assert(WARPS % 2 == 0, "gate and up warps");
    __shared__ float s_up[WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * (WARPS / 2) + warp / 2;
    const bool up = warp & 1, live = n < I;
    const int KV = K / 8;
    const uint4 *Wr = reinterpret_cast<const uint4 *>(W + (i64)(min(n, I - 1) + (up ? I : 0)) * K);
    const uint4 *xr = reinterpret_cast<const uint4 *>(x);
    // the weights' first round (two with NINFER_GEMV_PRE 2), while the previous kernel finishes (gemv.cuh)
    uint4 first[U], second[U];
    const bool rounds = live && lane + 32 * (U - 1) < KV;
    const bool pre2 = NINFER_GEMV_PRE >= 2 && live && lane + 32 * (2 * U - 1) < KV;
    if (NINFER_GEMV_PRE && rounds) {
#pragma unroll
        for (int u = 0; u < U; u++) first[u] = load_stream(Wr + lane + 32 * u);
        if (pre2) {
#pragma unroll
            for (int u = 0; u < U; u++) second[u] = load_stream(Wr + lane + 32 * (U + u));
        }
    } else if (!NINFER_GEMV_PRE && live) {
#pragma unroll
        for (int u = 0; u < U; u++)
            if (lane + 32 * u < KV) prefetch_l2(Wr + lane + 32 * u);
    }
    pdl_stream_enter();
    float acc = 0.f;
    if (live) {
        int v = NINFER_GEMV_PRE && rounds ? gemv_rounds_from<T, U>(Wr, xr, lane, KV, acc, first, second, pre2)
                                          : gemv_rounds_next<T, U>(Wr, xr, lane, KV, acc);
        for (; v < KV; v += 32) {
            float wf[8], xf[8];
            unpack8<T>(load_stream(Wr + v), wf);
            unpack8<T>(__ldg(xr + v), xf);
#pragma unroll
            for (int i = 0; i < 8; i++) acc = fmaf(wf[i], xf[i], acc);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0 && up) s_up[warp] = acc;
    __syncthreads();
    if (lane == 0 && !up && live) {
        const float g = to_f(from_f<T>(acc)), u = to_f(from_f<T>(s_up[warp + 1]));  // stored in T unfused
        y[n] = from_f<T>(g / (1.f + expf(-g)) * u);
    }
}

}  // namespace ninfer

// Entry points for one dtype; NINFER_GEMV_WARPS / NINFER_GEMV_UNROLL come from the backend's source.
#define NINFER_FUSED_KERNELS(S, T)                                                                      \
    extern "C" __global__ void __launch_bounds__(1024)                                                  \
        add_rms_norm_##S(const T *x, const T *r, const T *w, T *y, T *h, int H, float eps, unsigned char *xq, \
                         int2 *xg) {                                                                    \
        ninfer::add_rms_norm<T, false>(x, r, w, y, h, H, eps, xq, xg); /* its own PDL wait */           \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024)                                                  \
        add_rms_norm_zc_##S(const T *x, const T *r, const T *w, T *y, T *h, int H, float eps, unsigned char *xq, \
                            int2 *xg) {                                                                 \
        ninfer::add_rms_norm<T, true>(x, r, w, y, h, H, eps, xq, xg); /* its own PDL wait */            \
    }                                                                                                   \
    extern "C" __global__ void rope_write_kv_##S(                                                       \
        const T *q, const T *k, const T *v, const T *qn, const T *kn, const long long *pos, const float *cs, \
        T *qo, T *kc, T *vc, const long long *slots, int Hq, int Hk, int D, int rd, int q_ts, int q_hs,  \
        int k_ts, int v_ts, float eps, int zc) {                                                        \
        ninfer::rope_write_kv<T>(q, k, v, qn, kn, pos, cs, qo, kc, vc, slots, Hq, Hk, D, rd, q_ts, q_hs, \
                                 k_ts, v_ts, eps, zc);                                                  \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_silu_t1_##S(const T *W, const T *x, T *y, int I, int K) {                                \
        ninfer::gemv_silu<T, NINFER_GEMV_UNROLL, NINFER_GEMV_WARPS>(W, x, y, I, K);                     \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(NINFER_GEMV_WARPS * 32)                                 \
        gemv_silu2_t1_##S(const T *W, const T *x, T *y, int I, int K) {                               \
        ninfer::gemv_silu2<T, NINFER_GEMV_WARPS>(W, x, y, I, K);                                        \
    }
