// Paged attention for decode and verify (flash-decoding): the context is cut into splits of C keys;
// one block per (kv head, split, chunk of up to R query rows) writes an unnormalised partial output with
// its row max and sum, and a combine kernel merges the splits. Query rows of one kv head (GQA group x
// tokens) share every K/V load. Causal per row: query t sees keys 0..positions[t]. Nothing here reads
// the context length on the host, so a CUDA graph replays it for any length up to the block table's.
#pragma once
#include "common.cuh"

namespace ninfer {

// Query row `row` of kv head `kvh` is token row / grp, head kvh * grp + row % grp: its index in [T * Hq].
__device__ __forceinline__ i64 out_index(int row, int grp, int Hq, int kvh) {
    return (i64)(row / grp) * Hq + kvh * grp + row % grp;
}

// Keys per split of one launch. The launcher sizes the grid for the block table's capacity, S splits of C keys
// (powers of two). At a shorter context, last position `last`, the splits shrink, down to cmin, while S of them
// still cover keys 0..last: a 512-token context in a 32K-token table runs 17 splits of 32 keys, not 2 of 256,
// and one graph still serves every length. The split and combine kernels compute it alike.
__device__ __forceinline__ int launch_split(int C, int cmin, int S, i64 last) {
#ifdef NINFER_ATTN_FIXED_SPLIT  // measurements only: the capacity's splits at any context (the kernels before)
    return C;
#endif
    int c = min(cmin, C);
    while (c < C && (i64)c * S < last + 1) c <<= 1;
    return c;
}

// Phases 1-3 of one block of attention_split (below): scores, probabilities, partial output of its split.
template <typename T, int D, int R, int CMAX, int NW>
__device__ __forceinline__ void split_partials(const T *__restrict__ q, const T *__restrict__ k_cache,
                                               const T *__restrict__ v_cache, const int *__restrict__ block_table,
                                               float *__restrict__ part_o, float *__restrict__ part_ml, int Hq,
                                               int Hk, int bs, int S, int q_stride, float scale, int row0, int nr,
                                               int key0, int nkeys, const int *lim, float (*s_p)[CMAX],
                                               float (*s_o)[R][D]) {
    constexpr int G = D / 8;     // lanes per key row, 16 bytes each
    constexpr int KPW = 32 / G;  // keys a warp handles per step
    constexpr int UNR = 4;       // steps whose loads are in flight together
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int grp = Hq / Hk;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / G, gl = lane % G;

    // phase 1: scores s[r][j] = scale * q_r . k_j
    {
        float qf[R][8];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int row = row0 + min(r, nr - 1);
            const int t = row / grp, h = kvh * grp + row % grp;
            unpack8<T>(*reinterpret_cast<const uint4 *>(q + (i64)t * q_stride + (i64)h * D + gl * 8), qf[r]);
#pragma unroll
            for (int i = 0; i < 8; i++) qf[r][i] *= scale;
        }
        // the loop runs warp-uniformly (the shuffles need every lane); lanes past the end compute junk.
        // UNR keys per lane are loaded before any is used, so their (block table -> K) chains overlap.
        for (int jb = warp * KPW; jb < nkeys; jb += NW * KPW * UNR) {
            uint4 kraw[UNR];
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                const int key = key0 + min(jb + u * NW * KPW + sub, nkeys - 1);
                const i64 slot = (i64)block_table[key / bs] * bs + key % bs;
                kraw[u] = *reinterpret_cast<const uint4 *>(k_cache + (slot * Hk + kvh) * D + gl * 8);
            }
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                const int j = jb + u * NW * KPW + sub;
                float kf[8];
                unpack8<T>(kraw[u], kf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float d = 0.f;
#pragma unroll
                    for (int i = 0; i < 8; i++) d = fmaf(qf[r][i], kf[i], d);
#pragma unroll
                    for (int o = G / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                    if (gl == 0 && r < nr && j < nkeys) s_p[r][j] = j <= lim[r] ? d : neg_inf();
                }
            }
        }
    }
    __syncthreads();

    // phase 2: per row max, probabilities and their sum
    for (int r = warp; r < nr; r += NW) {
        float m = neg_inf();
        for (int j = lane; j < nkeys; j += 32) m = fmaxf(m, s_p[r][j]);
        m = warp_max(m);
        float l = 0.f;
        for (int j = lane; j < nkeys; j += 32) {
            const float p = m == neg_inf() ? 0.f : __expf(s_p[r][j] - m);
            s_p[r][j] = p;
            l += p;
        }
        l = warp_sum(l);
        if (lane == 0) {
            const i64 o = out_index(row0 + r, grp, Hq, kvh);
            part_ml[(o * S + split) * 2] = m;
            part_ml[(o * S + split) * 2 + 1] = l;
        }
    }
    __syncthreads();

    // phase 3: o[r] = sum_j p[r][j] * v_j
    {
        float acc[R][8];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int i = 0; i < 8; i++) acc[r][i] = 0.f;
        for (int jb = warp * KPW; jb < nkeys; jb += NW * KPW * UNR) {
            uint4 vraw[UNR];
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                const int key = key0 + min(jb + u * NW * KPW + sub, nkeys - 1);
                const i64 slot = (i64)block_table[key / bs] * bs + key % bs;
                vraw[u] = *reinterpret_cast<const uint4 *>(v_cache + (slot * Hk + kvh) * D + gl * 8);
            }
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                const int j = jb + u * NW * KPW + sub;
                if (j >= nkeys) continue;
                float vf[8];
                unpack8<T>(vraw[u], vf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float p = s_p[r][j];
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r][i] = fmaf(p, vf[i], acc[r][i]);
                }
            }
        }
#pragma unroll
        for (int o = G; o < 32; o <<= 1)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], o);
        if (sub == 0) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < nr)
#pragma unroll
                    for (int i = 0; i < 8; i++) s_o[warp][r][gl * 8 + i] = acc[r][i];
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * D; i += blockDim.x) {
        const int r = i / D, d = i % D;
        const i64 o = out_index(row0 + r, grp, Hq, kvh);
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < NW; w++) sum += s_o[w][r][d];
        part_o[(o * S + split) * D + d] = sum;
    }
}

// The last block of a (kv head, row chunk) to finish its split merges every split of its rows into
// out, as attention_combine does, so decode needs no second launch. counters[z * Hk + kvh] counts the
// finished splits; that last block sets it back to 0 for the next launch (graph replays included).
// Needs S <= CMAX: the split weights live in s_p. Opt-in (NINFER_FUSED=...,attention_merge): on the H200
// at 512 context it took 14.4 us a call against 10.2 us for split + combine kernels (bench/RESULTS.md).
template <typename T, int D, int R, int CMAX, int NW>
__device__ __forceinline__ void combine_in_last_block(const float *part_o, const float *part_ml,
                                                      const i64 *__restrict__ positions, T *__restrict__ out,
                                                      int *__restrict__ counters, int Hq, int Hk, int S, int C,
                                                      int row0, int nr, float (*s_p)[CMAX]) {
    __shared__ int s_last;
    __shared__ float s_den[R];
    const int kvh = blockIdx.x, grp = Hq / Hk;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __threadfence();  // this block's partials are visible to the block that merges them
    __syncthreads();
    if (threadIdx.x == 0) {
        int *counter = counters + blockIdx.z * Hk + kvh;
        s_last = atomicAdd(counter, 1) == S - 1;
        if (s_last) *counter = 0;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int r = warp; r < nr; r += NW) {  // a warp per row: the split weights exp(m_s - max m)
        const i64 o = out_index(row0 + r, grp, Hq, kvh);
        const int ns = min(S, (int)((positions[(row0 + r) / grp] + C) / C));
        const float *ml = part_ml + o * S * 2;
        float m = neg_inf();
        for (int s = lane; s < ns; s += 32) m = fmaxf(m, __ldcg(ml + 2 * s));
        m = warp_max(m);
        float l = 0.f;
        for (int s = lane; s < ns; s += 32) {
            const float ms = __ldcg(ml + 2 * s);
            const float w = ms == neg_inf() ? 0.f : __expf(ms - m);
            s_p[r][s] = w;
            l += w * __ldcg(ml + 2 * s + 1);
        }
        l = warp_sum(l);
        if (lane == 0) s_den[r] = l;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * D; i += blockDim.x) {
        const int r = i / D, d = i % D;
        const i64 o = out_index(row0 + r, grp, Hq, kvh);
        const int ns = min(S, (int)((positions[(row0 + r) / grp] + C) / C));
        const float *po = part_o + o * S * D + d;
        float num = 0.f;
#pragma unroll 4
        for (int s = 0; s < ns; s++) num = fmaf(s_p[r][s], __ldcg(po + (i64)s * D), num);
        out[o * D + d] = from_f<T>(num / s_den[r]);
    }
}

// grid (Hk, S, ceil(T * G / R)), block NW * 32 threads; C <= CMAX keys per split.
// q: [T, Hq, D] (rows at q_stride); caches [blocks, bs, Hk, D]; part_o: [T, Hq, S, D]; part_ml: [T, Hq, S, 2].
// COMBINE: the last split of each (kv head, row chunk) also writes out [T, Hq, D] (combine_in_last_block).
template <typename T, int D, int R, int CMAX, int NW, bool COMBINE>
__device__ __forceinline__ void attention_split(const T *__restrict__ q, const T *__restrict__ k_cache,
                                                const T *__restrict__ v_cache, const int *__restrict__ block_table,
                                                const i64 *__restrict__ positions, float *part_o, float *part_ml,
                                                int ntok, int Hq, int Hk, int bs, int S, int C, int cmin,
                                                int q_stride, float scale, T *out, int *counters) {
    __shared__ float s_p[R][CMAX];
    C = launch_split(C, cmin, S, positions[ntok - 1]);
    __shared__ float s_o[NW][R][D];  // per-warp partial outputs, summed in a fixed order (deterministic)
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int grp = Hq / Hk;
    const int row0 = blockIdx.z * R;
    const int nr = min(R, ntok * grp - row0);
    const int key0 = split * C;
    const int t_last = (row0 + nr - 1) / grp;
    const int nkeys = min(C, (int)(positions[t_last] + 1) - key0);

    int lim[R];  // local key j is visible to row r iff j <= lim[r]
#pragma unroll
    for (int r = 0; r < R; r++) lim[r] = (int)positions[(row0 + min(r, nr - 1)) / grp] - key0;
    if (nkeys <= 0) {  // this split lies past every row's context: mark it empty
        for (int r = threadIdx.x; r < nr; r += blockDim.x) {
            const i64 o = out_index(row0 + r, grp, Hq, kvh);
            part_ml[(o * S + split) * 2] = neg_inf();
            part_ml[(o * S + split) * 2 + 1] = 0.f;
        }
    } else {
        split_partials<T, D, R, CMAX, NW>(q, k_cache, v_cache, block_table, part_o, part_ml, Hq, Hk, bs, S,
                                          q_stride, scale, row0, nr, key0, nkeys, lim, s_p, s_o);
    }
    if (COMBINE) combine_in_last_block<T, D, R, CMAX, NW>(part_o, part_ml, positions, out, counters, Hq, Hk, S, C,
                                                          row0, nr, s_p);
}

// grid T * Hq, block COMBINE_THREADS: merge the splits of each row, weighting each by exp(m_s - max m). The
// split maxima and weights are computed by all threads at once; then the threads form P = threads / (D / 4)
// groups, group p summing splits p, p + P, ... of its 4 output dims (float4 loads, all independent, so a
// row's partials stream in a few L2 round trips instead of one per split), and the P sums of each dim are
// added in group order (deterministic). Needs D % 4 == 0 and D / 4 <= COMBINE_THREADS.
constexpr int ATTN_MAX_SPLITS = 1024;
constexpr int COMBINE_THREADS = 256;

template <typename T>
__device__ __forceinline__ void attention_combine(const float *__restrict__ part_o, const float *__restrict__ part_ml,
                                                  const i64 *__restrict__ positions, T *__restrict__ out, int Hq,
                                                  int S, int C, int cmin, int D) {
    __shared__ float s_w[ATTN_MAX_SPLITS];
    __shared__ float scratch[32];
    __shared__ __align__(16) float s_sum[COMBINE_THREADS * 4];
    C = launch_split(C, cmin, S, positions[gridDim.x / Hq - 1]);  // as the split kernel did
    const i64 row = blockIdx.x;
    const int t = (int)(row / Hq);
    const int ns = min(S, (int)((positions[t] + C) / C));  // splits holding keys 0..positions[t]
    const float *ml = part_ml + row * S * 2;
    float m = neg_inf();
    for (int s = threadIdx.x; s < ns; s += blockDim.x) m = fmaxf(m, ml[2 * s]);
    m = warp_max(m);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = m;
    __syncthreads();
    float M = neg_inf();
    for (int w = 0; w < (int)blockDim.x / 32; w++) M = fmaxf(M, scratch[w]);
    __syncthreads();
    float l = 0.f;
    for (int s = threadIdx.x; s < ns; s += blockDim.x) {
        const float ms = ml[2 * s];
        const float w = ms == neg_inf() ? 0.f : __expf(ms - M);
        s_w[s] = w;
        l += w * ml[2 * s + 1];
    }
    const float den = row_sum(l, scratch);  // ends with a barrier: s_w is complete
    const int V = D / 4, P = (int)blockDim.x / V;
    const int v = threadIdx.x % V, p = threadIdx.x / V;
    float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
    if (p < P) {
        const float4 *po = reinterpret_cast<const float4 *>(part_o + row * S * D) + v;
#pragma unroll 8
        for (int s = p; s < ns; s += P) {
            const float4 x = po[(i64)s * V];
            const float w = s_w[s];
            num.x = fmaf(w, x.x, num.x);
            num.y = fmaf(w, x.y, num.y);
            num.z = fmaf(w, x.z, num.z);
            num.w = fmaf(w, x.w, num.w);
        }
        reinterpret_cast<float4 *>(s_sum)[p * V + v] = num;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.f;
        for (int q = 0; q < P; q++) acc += s_sum[q * D + d];
        out[row * D + d] = from_f<T>(acc / den);
    }
}

}  // namespace ninfer
