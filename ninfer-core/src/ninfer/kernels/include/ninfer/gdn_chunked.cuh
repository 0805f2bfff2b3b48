// The gated delta rule over a whole prompt, chunk by chunk (prefill): ninfer.reference.gdn.gdn_chunked, in two
// launches, and the prefill causal conv1d (ninfer.reference.gdn.causal_conv1d_prefill).
//
// Per value head h (key head hk = h / (H / Hk)) and chunk of C = 64 tokens, with q, k L2-normalised (q also
// scaled), G_t the chunk's cumulative log decay (g = 0 past the prompt's end, so G_63 = G of its last token):
//   A[t][j]   = beta_t e^(G_t - G_j) k_t.k_j        (j < t)     the strictly lower part of the WY system
//   W = (I + A)^-1 diag(beta e^G) K,  U = (I + A)^-1 diag(beta) V                       [C, Dk], [C, Dv]
//   Aqk[t][j] = e^(G_t - G_j) q_t.k_j               (j <= t)
// gdn_chunk_prep computes these for every chunk at once (grid: chunks x key heads; the key head's k.k and q.k
// products are shared by its value heads). gdn_chunk_state then walks the chunks in order, the state slice
// S [Dk, BV] of one value head in registers and shared memory (grid: value slices x value heads):
//   v_new = U - W S;   o = diag(e^G) Q S + Aqk v_new;   S <- e^(G_63) S + (diag(e^(G_63 - G)) K)^T v_new
// (= the reference's per-chunk solve, whose right-hand side beta V - diag(beta e^G) K S0 is split in two).
// Everything is fp32 on CUDA cores; q, k, v are read in their own dtype. Scratch between the launches
// (float32): W, U [H, Tp, Dk]; Aqk [H, NC, C, C]; G [H, Tp]; rq, rk [Hk, Tp] (the per-token norm factors,
// rq with the scale), Tp = NC * C.
#pragma once
#include "common.cuh"

namespace ninfer {

constexpr int GDN_CHUNK = 64;            // tokens per chunk
constexpr int GDN_PREP_THREADS = 256;    // = 2 * Dk: one W column and one U column per thread in the solve
constexpr int GDN_STATE_THREADS = 256;
constexpr int CONV_PREFILL_TOKENS = 64;  // tokens per thread of the prefill conv

// 4 consecutive elements (8-byte aligned for 16-bit types, 16-byte for float) as floats
template <typename T>
__device__ __forceinline__ void load4f(const T *p, float *f) {
    if constexpr (sizeof(T) == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
    } else {
        const uint2 v = *reinterpret_cast<const uint2 *>(p);
        const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
        for (int i = 0; i < 4; i++) f[i] = to_f(e[i]);
    }
}

// Dynamic shared memory of gdn_chunk_prep for element size es (the launcher computes the same):
// k and q transposed [Dk][C + 16/es] in T, k.k, q.k and A [C][C] fp32, 5 vectors of C floats.
__host__ __device__ constexpr int gdn_prep_ld(int es) { return GDN_CHUNK + 16 / es; }

template <typename T, int D>
__device__ __forceinline__ void gdn_chunk_prep(unsigned char *smem, const T *__restrict__ q, const T *__restrict__ k,
                                               const T *__restrict__ v, const float *__restrict__ g,
                                               const T *__restrict__ beta, float *__restrict__ W,
                                               float *__restrict__ U, float *__restrict__ Aqk, float *__restrict__ Gc,
                                               float *__restrict__ rq, float *__restrict__ rk, int ntok, int H, int Hk,
                                               int q_stride, int k_stride, int v_stride, int g_stride, int b_stride,
                                               float scale, float eps) {
    constexpr int C = GDN_CHUNK, NT = GDN_PREP_THREADS, NW = NT / 32;
    constexpr int LD = gdn_prep_ld(sizeof(T));
    static_assert(NT == 2 * D && C == 64 && (C / 4) * (C / 4) == NT, "gdn_chunk_prep shape");
    T *kt = reinterpret_cast<T *>(smem);  // [D][LD]: kt[d][t] = raw k_t[d]
    T *qt = kt + D * LD;                  // [D][LD]
    float *kk = reinterpret_cast<float *>(qt + D * LD);  // [C][C] normalised k_t.k_j (lower tiles)
    float *qk = kk + C * C;                              // [C][C] normalised, scaled q_t.k_j
    float *A = qk + C * C;                               // [C][C] this value head's strictly lower A
    float *nq = A + C * C, *nk = nq + C, *Gs = nk + C, *bs = Gs + C, *fw = bs + C;

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int c = blockIdx.x, hk = blockIdx.y, NC = gridDim.x, Tp = NC * C, r = H / Hk;
    const int t0 = c * C, n = min(C, ntok - t0);

    for (int e = tid; e < C * D; e += NT) {
        const int t = e / D, d = e % D;
        T a = from_f<T>(0.f), b = from_f<T>(0.f);
        if (t < n) {
            a = q[(i64)(t0 + t) * q_stride + (i64)hk * D + d];
            b = k[(i64)(t0 + t) * k_stride + (i64)hk * D + d];
        }
        qt[d * LD + t] = a;
        kt[d * LD + t] = b;
    }
    __syncthreads();
    for (int t = warp; t < C; t += NW) {  // the L2 norms: a warp per token
        float sq = 0.f, sk = 0.f;
        for (int d = lane; d < D; d += 32) {
            const float a = to_f(qt[d * LD + t]), b = to_f(kt[d * LD + t]);
            sq = fmaf(a, a, sq), sk = fmaf(b, b, sk);
        }
        sq = warp_sum(sq), sk = warp_sum(sk);
        if (lane == 0) nq[t] = rsqrtf(sq + eps) * scale, nk[t] = rsqrtf(sk + eps);
    }
    __syncthreads();

    // k.k and q.k: thread (ti, tj) owns rows 4ti.., columns 4tj.. ; tiles above the diagonal stay zero
    const int ti = tid / (C / 4), tj = tid % (C / 4);
    {
        float akk[4][4], aqk[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) akk[i][j] = 0.f, aqk[i][j] = 0.f;
        if (tj <= ti) {
#pragma unroll 4
            for (int d = 0; d < D; d++) {
                float ka[4], kb[4], qa[4];
                load4f(kt + d * LD + 4 * ti, ka);
                load4f(kt + d * LD + 4 * tj, kb);
                load4f(qt + d * LD + 4 * ti, qa);
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        akk[i][j] = fmaf(ka[i], kb[j], akk[i][j]);
                        aqk[i][j] = fmaf(qa[i], kb[j], aqk[i][j]);
                    }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int t = 4 * ti + i, s = 4 * tj + j;
                kk[t * C + s] = akk[i][j] * nk[t] * nk[s];
                qk[t * C + s] = aqk[i][j] * nq[t] * nk[s];
            }
    }
    if (tid < C) {  // the norm factors, once per key head
        rq[(i64)hk * Tp + t0 + tid] = nq[tid];
        rk[(i64)hk * Tp + t0 + tid] = nk[tid];
    }

    const int col = tid % D;
    const bool is_u = tid >= D;  // warp-uniform
    for (int rr = 0; rr < r; rr++) {
        const int h = hk * r + rr;
        __syncthreads();  // kk/qk written; the previous value head is done with Gs, bs, fw, A
        if (tid < C) {
            Gs[tid] = tid < n ? g[(i64)(t0 + tid) * g_stride + h] : 0.f;
            bs[tid] = tid < n ? to_f(beta[(i64)(t0 + tid) * b_stride + h]) : 0.f;
        }
        __syncthreads();
        float Gt = 0.f;
        if (tid < C)
            for (int j = 0; j <= tid; j++) Gt += Gs[j];
        __syncthreads();
        if (tid < C) {
            Gs[tid] = Gt;
            Gc[(i64)h * Tp + t0 + tid] = Gt;
        }
        __syncthreads();
        if (tid < C) fw[tid] = bs[tid] * expf(Gs[tid]) * nk[tid];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int t = 4 * ti + i;
            const float G = Gs[t], b = bs[t];
            float o4[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int s = 4 * tj + j;
                const float dec = s <= t ? expf(G - Gs[s]) : 0.f;
                A[t * C + s] = s < t ? b * dec * kk[t * C + s] : 0.f;
                o4[j] = dec * qk[t * C + s];
            }
            *reinterpret_cast<float4 *>(Aqk + (((i64)h * NC + c) * C + t) * C + 4 * tj) =
                make_float4(o4[0], o4[1], o4[2], o4[3]);
        }
        __syncthreads();
        // forward substitution, one column per thread: x_t = rhs_t - sum_{j<t} A[t][j] x_j
        float x[C];
        if (is_u) {
#pragma unroll
            for (int t = 0; t < C; t++)
                x[t] = t < n ? bs[t] * to_f(v[(i64)(t0 + t) * v_stride + (i64)h * D + col]) : 0.f;
        } else {
#pragma unroll
            for (int t = 0; t < C; t++) x[t] = fw[t] * to_f(kt[col * LD + t]);
        }
#pragma unroll
        for (int t = 1; t < C; t++) {
            float acc = x[t];
#pragma unroll
            for (int j = 0; j < t; j++) acc = fmaf(-A[t * C + j], x[j], acc);
            x[t] = acc;
        }
        float *dst = (is_u ? U : W) + ((i64)h * Tp + t0) * D + col;
#pragma unroll
        for (int t = 0; t < C; t++) dst[(i64)t * D] = x[t];
    }
}

template <typename T, int D, int BV>
__device__ __forceinline__ void gdn_chunk_state(const T *__restrict__ q, const T *__restrict__ k,
                                                const float *__restrict__ W, const float *__restrict__ U,
                                                const float *__restrict__ Aqk, const float *__restrict__ Gc,
                                                const float *__restrict__ rq, const float *__restrict__ rk,
                                                const float *state_in, T *__restrict__ out, float *state_out,
                                                int ntok, int H, int Hk, int q_stride, int k_stride, int NC) {
    constexpr int C = GDN_CHUNK, NT = GDN_STATE_THREADS;
    constexpr int G1 = NT / C, CP1 = BV / G1;  // v_new and o: thread (t1, c1) owns CP1 columns of token t1
    constexpr int G2 = NT / D, CP2 = BV / G2;  // the state: thread (k2, c2) owns CP2 columns of row k2
    static_assert(NT % C == 0 && NT % D == 0 && CP1 % 4 == 0 && CP2 % 4 == 0 && D % BV == 0, "gdn_chunk_state shape");
    __shared__ __align__(16) float hs[D][BV];
    __shared__ __align__(16) float vn[C][BV];
    __shared__ float fq[C], fk[C];

    const int tid = threadIdx.x;
    const int h = blockIdx.y, hk = h / (H / Hk), v0 = blockIdx.x * BV, Tp = NC * C;
    const int t1 = tid / G1, c1 = (tid % G1) * CP1;
    const int k2 = tid / G2, c2 = (tid % G2) * CP2;

    float hr[CP2];
#pragma unroll
    for (int j = 0; j < CP2; j += 4) {
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (state_in != nullptr) f = *reinterpret_cast<const float4 *>(state_in + ((i64)h * D + k2) * D + v0 + c2 + j);
        hr[j] = f.x, hr[j + 1] = f.y, hr[j + 2] = f.z, hr[j + 3] = f.w;
    }
#pragma unroll
    for (int j = 0; j < CP2; j++) hs[k2][c2 + j] = hr[j];

    for (int c = 0; c < NC; c++) {
        const int t0 = c * C, n = min(C, ntok - t0);
        const float *Gh = Gc + (i64)h * Tp + t0;
        if (tid < C) {
            const float G = Gh[tid];
            fq[tid] = rq[(i64)hk * Tp + t0 + tid] * expf(G);
            fk[tid] = tid < n ? rk[(i64)hk * Tp + t0 + tid] * expf(Gh[C - 1] - G) : 0.f;
        }
        const float decay = expf(Gh[C - 1]);
        __syncthreads();  // fq, fk and the state's shared copy are in

        // v_new = U - W S and q.S for token t1's columns
        float av[CP1], ao[CP1];
#pragma unroll
        for (int j = 0; j < CP1; j++) av[j] = 0.f, ao[j] = 0.f;
        if (t1 < n) {
            const float *Wr = W + ((i64)h * Tp + t0 + t1) * D;
            const T *qr = q + (i64)(t0 + t1) * q_stride + (i64)hk * D;
#pragma unroll 2
            for (int d = 0; d < D; d += 4) {
                const float4 w4 = *reinterpret_cast<const float4 *>(Wr + d);
                const float wv[4] = {w4.x, w4.y, w4.z, w4.w};
                float qv[4];
                load4f(qr + d, qv);
#pragma unroll
                for (int e = 0; e < 4; e++) {
#pragma unroll
                    for (int j = 0; j < CP1; j += 4) {
                        const float4 s4 = *reinterpret_cast<const float4 *>(&hs[d + e][c1 + j]);
                        const float sv[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
                        for (int m = 0; m < 4; m++) {
                            av[j + m] = fmaf(wv[e], sv[m], av[j + m]);
                            ao[j + m] = fmaf(qv[e], sv[m], ao[j + m]);
                        }
                    }
                }
            }
        }
        {
            const float *Ur = U + ((i64)h * Tp + t0 + t1) * D + v0 + c1;
#pragma unroll
            for (int j = 0; j < CP1; j++) vn[t1][c1 + j] = t1 < n ? Ur[j] - av[j] : 0.f;
        }
        __syncthreads();  // v_new is in

        if (t1 < n) {  // o = e^G q.S + sum_{j<=t} Aqk[t][j] v_new_j  (Aqk is zero above the diagonal)
            const float f = fq[t1];
#pragma unroll
            for (int j = 0; j < CP1; j++) ao[j] *= f;
            const float *Ar = Aqk + (((i64)h * NC + c) * C + t1) * C;
            for (int s = 0; s <= t1; s += 4) {
                const float4 a4 = *reinterpret_cast<const float4 *>(Ar + s);
                const float av4[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
                for (int e = 0; e < 4; e++)
#pragma unroll
                    for (int j = 0; j < CP1; j++) ao[j] = fmaf(av4[e], vn[s + e][c1 + j], ao[j]);
            }
            T *orow = out + ((i64)(t0 + t1) * H + h) * D + v0 + c1;
#pragma unroll
            for (int j = 0; j < CP1; j++) orow[j] = from_f<T>(ao[j]);
        }

        // S <- e^(G_63) S + sum_t (e^(G_63 - G_t) k_t) v_new_t^T, row k2
#pragma unroll
        for (int j = 0; j < CP2; j++) hr[j] *= decay;
        const T *kc = k + (i64)t0 * k_stride + (i64)hk * D + k2;
        for (int t = 0; t < n; t++) {
            const float kv = to_f(kc[(i64)t * k_stride]) * fk[t];
#pragma unroll
            for (int j = 0; j < CP2; j++) hr[j] = fmaf(kv, vn[t][c2 + j], hr[j]);
        }
        __syncthreads();  // everyone is done with vn, fq, fk and the old shared state
#pragma unroll
        for (int j = 0; j < CP2; j++) hs[k2][c2 + j] = hr[j];
    }
    if (state_out != nullptr) {
#pragma unroll
        for (int j = 0; j < CP2; j += 4)
            *reinterpret_cast<float4 *>(state_out + ((i64)h * D + k2) * D + v0 + c2 + j) =
                make_float4(hr[j], hr[j + 1], hr[j + 2], hr[j + 3]);
    }
}

// Causal depthwise conv + SiLU over a prompt (ninfer.reference.gdn.causal_conv1d_prefill): one thread per
// channel and CONV_PREFILL_TOKENS tokens (grid: channel blocks x token blocks). The earlier inputs come from
// the conv window (rounded to T, as the reference concatenates it in x's dtype) before the first token.
// The first token block also writes the new window, the last K-1 inputs; state_out must not alias state_in.
template <typename T, int K>
__device__ __forceinline__ void causal_conv1d_prefill(const T *__restrict__ x, const T *__restrict__ w,
                                                      const T *__restrict__ bias, const float *__restrict__ state_in,
                                                      T *__restrict__ y, float *__restrict__ state_out, int ntok,
                                                      int C, int x_stride) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int t0 = blockIdx.y * CONV_PREFILL_TOKENS, t_end = min(t0 + CONV_PREFILL_TOKENS, ntok);
    // input at position p (p < 0: the window, whose last entry is p = -1)
    auto input = [&](int p) -> float {
        return p >= 0 ? to_f(x[(i64)p * x_stride + c]) : to_f(from_f<T>(state_in[(i64)c * (K - 1) + (K - 1) + p]));
    };
    float win[K], tap[K];
#pragma unroll
    for (int i = 0; i < K - 1; i++) win[i] = input(t0 - (K - 1) + i);
#pragma unroll
    for (int i = 0; i < K; i++) tap[i] = to_f(w[(i64)c * K + i]);
    const float b = bias != nullptr ? to_f(bias[c]) : 0.f;
    for (int t = t0; t < t_end; t++) {
        win[K - 1] = to_f(x[(i64)t * x_stride + c]);
        float acc = 0.f;
#pragma unroll
        for (int i = 0; i < K; i++) acc += win[i] * tap[i];
        acc += b;
        y[(i64)t * C + c] = from_f<T>(acc / (1.f + expf(-acc)));
#pragma unroll
        for (int i = 0; i < K - 1; i++) win[i] = win[i + 1];
    }
    if (blockIdx.y == 0) {
#pragma unroll
        for (int i = 0; i < K - 1; i++) state_out[(i64)c * (K - 1) + i] = input(ntok - (K - 1) + i);
    }
}

}  // namespace ninfer
