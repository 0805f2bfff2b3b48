// Paged attention for decode and verify (flash-decoding): the context is cut into splits of C keys;
// one block per (kv head, split, chunk of up to R query rows) writes an unnormalised partial output with
// its row max and sum, and a combine kernel merges the splits. Query rows of one kv head (GQA group x
// tokens) share every K/V load. Causal per row: query t sees keys 0..positions[t]. Nothing here reads
// the context length on the host, so a CUDA graph replays it for any length up to the block table's.
#pragma once
#include "common.cuh"
#include "fixed_point.cuh"

namespace ninfer {

// Query row `row` of kv head `kvh` is token row / grp, head kvh * grp + row % grp: its index in [T * Hq].
__device__ __forceinline__ i64 out_index(int row, int grp, int Hq, int kvh) {
    return (i64)(row / grp) * Hq + kvh * grp + row % grp;
}

// Keys per split of one launch. The launcher sizes the grid for the block table's capacity, S splits of C keys
// (powers of two). At a shorter context, last position `last`, the splits shrink, down to cmin, while S of them
// still cover keys 0..last: a 512-token context in a 32K-token table runs 17 splits of 32 keys, not 2 of 256,
// and one graph still serves every length. `rule` is cmin, plus smax << 16 where a launch spreads a context over
// at most smax splits while it can (longer splits, fewer blocks: 64 splits of 64 keys at 4K rather than 128 of
// 32). The split and combine kernels compute it alike.
__device__ __forceinline__ int launch_split(int C, int rule, int S, i64 last) {
#ifdef NINFER_ATTN_FIXED_SPLIT  // measurements only: the capacity's splits at any context (the kernels before)
    return C;
#endif
    const int smax = rule >> 16;
    if (smax > 0 && smax < S) S = smax;
    int c = min(rule & 0xffff, C);
    while (c < C && (i64)c * S < last + 1) c <<= 1;
    return c;
}

// The two-pass form of one block of attention_split (below), for blocks of more rows than the one-pass form
// takes (every block under NINFER_ATTN_TWO_PASS, the kernel before): scores of every key of the split into shared
// memory, then probabilities, then a second round of loads for V.
template <typename T, int D, int R, int CMAX, int NW>
__device__ __forceinline__ void split_partials_two_pass(const T *__restrict__ q, const T *__restrict__ k_cache,
                                                        const T *__restrict__ v_cache,
                                                        const int *__restrict__ block_table, float *__restrict__ part_o,
                                                        float *__restrict__ part_ml, int Hq, int Hk, int bs, int S,
                                                        int q_stride, float scale, int row0, int nr, int key0,
                                                        int nkeys, const int *lim, float (*s_p)[CMAX],
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

#ifndef NINFER_ATTN_UNR
#define NINFER_ATTN_UNR 2  // keys per lane whose K and V rows one round requests (two rounds in flight)
#endif
#define NINFER_ATTN_PASS_ROWS 4  // the most query rows of a block the one-pass form takes (attention.py: PASS_ROWS)

// A shared-memory load the compiler keeps where it is (not hoisted out of a loop into registers).
__device__ __forceinline__ float4 lds128(const float *p) {
    float4 v;
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
    return v;
}

// Shared floats one block of attention_split uses: the one-pass form's per-warp partials (output, max, sum) and
// queries, the two-pass form's scores and per-warp outputs; the merge's split weights reuse them afterwards.
template <int D, int R, int CMAX, int NW>
struct SplitSmem {
    static constexpr int one_pass = (NW + 1) * NINFER_ATTN_PASS_ROWS * D + 2 * NW * NINFER_ATTN_PASS_ROWS;
    static constexpr int two_pass = R * CMAX + NW * R * D;  // >= R * CMAX, the merge's weights
    static constexpr int floats = one_pass > two_pass ? one_pass : two_pass;
};

// One block of attention_split in one pass over its split, for up to R query rows (rows row0 .. row0 + nr): each
// round a lane requests the K and the V rows (16 bytes of each) of UNR keys together, and the next round's rows
// before it uses this round's, so a block has K and V of two rounds in flight and no second sweep for V. Each
// lane keeps, per query row, an online softmax over its keys (running max m, sum l, unnormalised output acc); the
// lanes of a warp and then the warps merge theirs in a fixed order (deterministic). The scaled queries sit in
// shared memory, read back each round, to keep registers near the two-pass form's (NVRTC 13.0, sm_90, the two
// forms in one kernel: 128 a thread at D = 256, ~141 at D = 128 and 64, where the two-pass form alone takes 128).
//
// EARLY (the decode entry point, attention_split1, where PDL launches it while the kernel before still runs): the
// block requests its first two rounds of K and V rows before pdl_wait, so that their (positions -> block table ->
// K/V) chain overlaps the kernel before (RoPE and the KV write) instead of following it. That kernel writes the
// keys of this launch's tokens (positions first_new and on) and q; every other key was written by an earlier step,
// and a kernel that launches early sees everything written before the kernel just ahead of it (that one waited for
// it before it let this launch start). After the wait, a lane whose early key is a new one requests it again.
template <typename T, int D, int R, int NW, bool EARLY = false, bool LOCAL = false>
__device__ __forceinline__ void split_pass(const T *__restrict__ q, const T *__restrict__ k_cache,
                                           const T *__restrict__ v_cache, const int *__restrict__ block_table,
                                           float *__restrict__ part_o, float *__restrict__ part_ml, int Hq, int Hk,
                                           const i64 *__restrict__ positions, int bs, int S, int q_stride,
                                           float scale, int row0, int nr, int key0, int nkeys, float *smem,
                                           i64 first_new = 0, float *local = nullptr) {
    constexpr int G = D / 8;     // lanes per key row, 16 bytes each
    constexpr int KPW = 32 / G;  // keys a warp handles per step
    constexpr int UNR = NINFER_ATTN_UNR;
    constexpr int STEP = NW * KPW;     // keys a block handles per step
    constexpr int ROUND = STEP * UNR;  // keys a block handles per round
    float(*s_o)[R][D] = reinterpret_cast<float(*)[R][D]>(smem);                // [NW][R][D]
    float(*s_ml)[R][2] = reinterpret_cast<float(*)[R][2]>(smem + NW * R * D);  // [NW][R][(m, l)]
    float(*s_q)[D] = reinterpret_cast<float(*)[D]>(smem + NW * R * D + 2 * NW * R);  // [R][D]
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int grp = Hq / Hk;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / G, gl = lane % G;

    uint4 kc[UNR], vc[UNR], kn[UNR], vn[UNR];  // this round's rows, the next round's
    auto request = [&](int jb, uint4 *kr, uint4 *vr) {  // the K and V rows of keys jb + u * STEP + sub
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            const int key = key0 + min(jb + u * STEP + sub, nkeys - 1);
            const i64 slot = (i64)__ldg(block_table + key / bs) * bs + key % bs;
            const i64 off = (slot * Hk + kvh) * D + gl * 8;
            kr[u] = *reinterpret_cast<const uint4 *>(k_cache + off);
            vr[u] = *reinterpret_cast<const uint4 *>(v_cache + off);
        }
    };
    // the loop runs warp-uniformly (the shuffles need every lane); lanes past the end load a valid key, masked
    int jb = warp * KPW;
    request(jb, kc, vc);
    bool requested = false;  // the next round's rows are already on their way (EARLY)
    if (EARLY) {
        requested = jb + ROUND < nkeys;  // warp-uniform
        if (requested) request(jb + ROUND, kn, vn);
        pdl_enter();
        auto renew = [&](int j0, uint4 *kr, uint4 *vr) {  // the new keys' rows, now written
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                const int key = key0 + min(j0 + u * STEP + sub, nkeys - 1);
                if (key >= first_new) {
                    const i64 slot = (i64)__ldg(block_table + key / bs) * bs + key % bs;
                    const i64 off = (slot * Hk + kvh) * D + gl * 8;
                    kr[u] = __ldcg(reinterpret_cast<const uint4 *>(k_cache + off));  // from L2: past L1's early line
                    vr[u] = __ldcg(reinterpret_cast<const uint4 *>(v_cache + off));
                }
            }
        };
        renew(jb, kc, vc);
        if (requested) renew(jb + ROUND, kn, vn);
    }

    int lim[R];  // local key j is visible to row r iff j <= lim[r]
#pragma unroll
    for (int r = 0; r < R; r++) lim[r] = (int)positions[(row0 + min(r, nr - 1)) / grp] - key0;
    // the queries, scaled, into shared memory while the first rows are on their way (read back in each round,
    // so they take no registers)
    for (int i = threadIdx.x; i < R * G; i += blockDim.x) {
        const int r = i / G, c = i % G;
        const int row = row0 + min(r, nr - 1);
        const int t = row / grp, h = kvh * grp + row % grp;
        float f[8];
        unpack8<T>(*reinterpret_cast<const uint4 *>(q + (i64)t * q_stride + (i64)h * D + c * 8), f);
#pragma unroll
        for (int e = 0; e < 8; e++) s_q[r][c * 8 + e] = f[e] * scale;
    }
    __syncthreads();
    float m[R], l[R], acc[R][8];
#pragma unroll
    for (int r = 0; r < R; r++) {
        m[r] = neg_inf();
        l[r] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[r][i] = 0.f;
    }
    for (; jb < nkeys; jb += ROUND) {
        const bool more = jb + ROUND < nkeys;  // warp-uniform
        if (more && !requested) request(jb + ROUND, kn, vn);
        requested = false;
        float s[UNR][R];
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            float kf[8];
            unpack8<T>(kc[u], kf);
            const int j = jb + u * STEP + sub;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float4 qa = lds128(&s_q[r][gl * 8]), qb = lds128(&s_q[r][gl * 8 + 4]);
                float d = qa.x * kf[0];
                d = fmaf(qa.y, kf[1], d);
                d = fmaf(qa.z, kf[2], d);
                d = fmaf(qa.w, kf[3], d);
                d = fmaf(qb.x, kf[4], d);
                d = fmaf(qb.y, kf[5], d);
                d = fmaf(qb.z, kf[6], d);
                d = fmaf(qb.w, kf[7], d);
#pragma unroll
                for (int o = G / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                s[u][r] = j < nkeys && j <= lim[r] ? d : neg_inf();
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float mx = m[r];
#pragma unroll
            for (int u = 0; u < UNR; u++) mx = fmaxf(mx, s[u][r]);
            const float alpha = m[r] == neg_inf() ? 0.f : __expf(m[r] - mx);  // mx >= m[r]
            m[r] = mx;
            float ls = l[r] * alpha;
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                s[u][r] = s[u][r] == neg_inf() ? 0.f : __expf(s[u][r] - mx);
                ls += s[u][r];
            }
            l[r] = ls;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[r][i] *= alpha;
        }
#pragma unroll
        for (int u = 0; u < UNR; u++) {
            float vf[8];
            unpack8<T>(vc[u], vf);
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r][i] = fmaf(s[u][r], vf[i], acc[r][i]);
        }
        if (more) {
#pragma unroll
            for (int u = 0; u < UNR; u++) {
                kc[u] = kn[u];
                vc[u] = vn[u];
            }
        }
    }

    // merge the lanes of a warp (its KPW key groups; a group's G lanes hold the same m and l), then the warps
#pragma unroll
    for (int r = 0; r < R; r++) {
        float M = m[r];
#pragma unroll
        for (int o = G; o < 32; o <<= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        const float w = m[r] == neg_inf() ? 0.f : __expf(m[r] - M);
        float ls = l[r] * w;
#pragma unroll
        for (int o = G; o < 32; o <<= 1) ls += __shfl_xor_sync(0xffffffffu, ls, o);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float a = acc[r][i] * w;
#pragma unroll
            for (int o = G; o < 32; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
            acc[r][i] = a;
        }
        if (sub == 0) {
            float4 *dst = reinterpret_cast<float4 *>(&s_o[warp][r][gl * 8]);
            dst[0] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
            dst[1] = make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
        }
        if (lane == 0) {
            s_ml[warp][r][0] = M;
            s_ml[warp][r][1] = ls;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nr * D; i += blockDim.x) {
        const int r = i / D, d = i % D;
        float M = neg_inf();
#pragma unroll
        for (int w = 0; w < NW; w++) M = fmaxf(M, s_ml[w][r][0]);
        float sum = 0.f, ls = 0.f;
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float mw = s_ml[w][r][0];
            const float ww = mw == neg_inf() ? 0.f : __expf(mw - M);
            sum = fmaf(ww, s_o[w][r][d], sum);
            ls = fmaf(ww, s_ml[w][r][1], ls);
        }
        if (LOCAL) {  // the cluster form: this block's partial stays in its shared memory (local: [R][D], [R][2])
            local[r * D + d] = sum;
            if (d == 0) {
                local[R * D + 2 * r] = M;
                local[R * D + 2 * r + 1] = ls;
            }
            continue;
        }
        const i64 o = out_index(row0 + r, grp, Hq, kvh);
        part_o[(o * S + split) * D + d] = sum;
        if (d == 0) {
            part_ml[(o * S + split) * 2] = M;
            part_ml[(o * S + split) * 2 + 1] = ls;
        }
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

// grid (Hk, S, chunks >= ceil(T * G / R)), block NW * 32 threads; C <= CMAX keys per split; a block takes
// ceil(T * G / chunks) query rows.
// q: [T, Hq, D] (rows at q_stride); caches [blocks, bs, Hk, D]; part_o: [T, Hq, S, D]; part_ml: [T, Hq, S, 2].
// COMBINE: the last split of each (kv head, row chunk) also writes out [T, Hq, D] (combine_in_last_block).
// A block of up to NINFER_ATTN_PASS_ROWS rows (decode of a GQA group of <= 4 q heads) runs the one-pass form
// (split_pass), a block of more rows the two-pass form (split_partials_two_pass). On the H200 (bench/RESULTS.md,
// attn5) the one-pass form was faster for 4-row blocks, and slower for 6-8 rows (27B decode, verify), whether it
// took them in passes of 4 or held 8 rows' accumulators (fewer blocks an SM). NINFER_ATTN_TWO_PASS (measurements
// only): the two-pass form for every block, as before.
// FORM: 1 the one-pass form only, 2 the two-pass form only (separate entry points: a kernel holding both forms
// took 141 registers instead of 128, one block fewer an SM for the two-pass launches, verify 8-10 % slower at
// 4-16K in attn5's call 2), 0 either by the block's rows (the merged split + combine).
// EARLY: the entry point has not waited (pdl_wait) yet: the one-pass form requests its first K/V rows before it
// waits (split_pass), every other path waits first. Only for launches where the kernel just before writes no key
// below the launch's lowest position (paged_attention's callers: RoPE and the KV write of this step's tokens).
template <typename T, int D, int R, int CMAX, int NW, bool COMBINE, int FORM = 0, bool EARLY = false>
__device__ __forceinline__ void attention_split(const T *__restrict__ q, const T *__restrict__ k_cache,
                                                const T *__restrict__ v_cache, const int *__restrict__ block_table,
                                                const i64 *__restrict__ positions, float *part_o, float *part_ml,
                                                int ntok, int Hq, int Hk, int bs, int S, int C, int cmin,
                                                int q_stride, float scale, T *out, int *counters) {
    __shared__ __align__(16) float smem[SplitSmem<D, R, CMAX, NW>::floats];
    C = launch_split(C, cmin, S, positions[ntok - 1]);
    const int kvh = blockIdx.x, split = blockIdx.y;
    const int grp = Hq / Hk;
    const int rpb = (ntok * grp + gridDim.z - 1) / gridDim.z;  // rows per block: <= R (the launcher's chunks)
    const int row0 = blockIdx.z * rpb;
    const int nr = min(rpb, ntok * grp - row0);
    const int key0 = split * C;
    const int t_last = (row0 + nr - 1) / grp;
    const int nkeys = min(C, (int)(positions[t_last] + 1) - key0);

    if (nkeys <= 0) {  // this split lies past every row's context: mark it empty
        if (EARLY) pdl_enter();
        for (int r = threadIdx.x; r < nr; r += blockDim.x) {
            const i64 o = out_index(row0 + r, grp, Hq, kvh);
            part_ml[(o * S + split) * 2] = neg_inf();
            part_ml[(o * S + split) * 2 + 1] = 0.f;
        }
    } else {
#ifndef NINFER_ATTN_TWO_PASS
        constexpr int PR = NINFER_ATTN_PASS_ROWS < R ? NINFER_ATTN_PASS_ROWS : R;
        if (FORM == 1 || (FORM == 0 && nr <= PR)) {  // decode of up to 4 q heads a kv head (Llama-3-8B): one pass
            i64 first_new = positions[0];  // the lowest key this launch's tokens write
            for (int t = 1; t < ntok; t++) first_new = min(first_new, positions[t]);
            split_pass<T, D, PR, NW, EARLY>(q, k_cache, v_cache, block_table, part_o, part_ml, Hq, Hk, positions, bs,
                                            S, q_stride, scale, row0, nr, key0, nkeys, smem, first_new);
        } else
#endif
        {  // more rows (27B decode, verify): the two-pass form, every row in one sweep
            if (EARLY) pdl_enter();
            int lim[R];  // local key j is visible to row r iff j <= lim[r]
#pragma unroll
            for (int r = 0; r < R; r++) lim[r] = (int)positions[(row0 + min(r, nr - 1)) / grp] - key0;
            split_partials_two_pass<T, D, R, CMAX, NW>(q, k_cache, v_cache, block_table, part_o, part_ml, Hq, Hk, bs,
                                                       S, q_stride, scale, row0, nr, key0, nkeys, lim,
                                                       reinterpret_cast<float(*)[CMAX]>(smem),
                                                       reinterpret_cast<float(*)[R][D]>(smem + R * CMAX));
        }
    }
    if (COMBINE)  // its split weights reuse the shared partials (combine_in_last_block waits for every thread)
        combine_in_last_block<T, D, R, CMAX, NW>(part_o, part_ml, positions, out, counters, Hq, Hk, S, C, row0, nr,
                                                 reinterpret_cast<float(*)[CMAX]>(smem));
}

// Thread block clusters (sm_90+): a barrier over the cluster's blocks, and a float of another block's shared memory.
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ float ld_cluster(const float *p, int rank) {
#if __CUDA_ARCH__ >= 900
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
    return v;
#else
    return *p;  // never launched below sm_90 (the launcher: cluster_capable)
#endif
}

// Decode attention of one token in one launch (sm_90+), for a GQA group of up to NINFER_ATTN_PASS_ROWS q heads:
// grid (Hk, NC), clusters of NC blocks along y, one cluster per kv head. The context (positions[0] + 1 keys, read
// on the device, so one CUDA graph serves every length) is cut into NC equal runs; block `rank` runs the one-pass
// form (split_pass) over run `rank` and keeps its partial (unnormalised output, max, sum per row) in its shared
// memory. After a cluster barrier each block merges a share of the outputs, reading the NC partials from the
// blocks' shared memory (DSMEM) in rank order, and writes out [1, Hq, D]: no partials in global memory and no
// combine launch. A second barrier keeps every block's shared memory alive until its peers have read it.
template <typename T, int D, int NC, int NW, bool EARLY = false>
__device__ __forceinline__ void attention_cluster(const T *__restrict__ q, const T *__restrict__ k_cache,
                                                  const T *__restrict__ v_cache, const int *__restrict__ block_table,
                                                  const i64 *__restrict__ positions, T *__restrict__ out, int Hq,
                                                  int Hk, int bs, int q_stride, float scale) {
    constexpr int R = NINFER_ATTN_PASS_ROWS;
    __shared__ __align__(16) float smem[(NW + 1) * R * D + 2 * NW * R];  // split_pass's scratch
    __shared__ __align__(16) float s_part[R * D + 2 * R];               // this block's partial: [R][D], [R][2]
    const int kvh = blockIdx.x, rank = blockIdx.y;  // clusters span y: the rank in the cluster is blockIdx.y
    const int nr = Hq / Hk;                         // the launcher checks nr <= R
    const i64 n = positions[0] + 1;  // EARLY: written before the kernel just ahead (split_pass)
    const int run = (int)((n + NC - 1) / NC);
    const int key0 = rank * run;
    const int nkeys = (int)min((i64)run, n - key0);
    if (nkeys <= 0) {
        if (EARLY) pdl_enter();
        for (int r = threadIdx.x; r < R; r += blockDim.x) {
            s_part[R * D + 2 * r] = neg_inf();
            s_part[R * D + 2 * r + 1] = 0.f;
        }
    } else {
        split_pass<T, D, R, NW, EARLY, true>(q, k_cache, v_cache, block_table, nullptr, nullptr, Hq, Hk, positions,
                                             bs, 1, q_stride, scale, 0, nr, key0, nkeys, smem, positions[0], s_part);
    }
    cluster_sync();
    const int grp = nr;
    for (int i = rank * blockDim.x + threadIdx.x; i < nr * D; i += NC * blockDim.x) {
        const int r = i / D, d = i % D;
        float ms[NC];
        float M = neg_inf();
#pragma unroll
        for (int s = 0; s < NC; s++) {
            ms[s] = ld_cluster(&s_part[R * D + 2 * r], s);
            M = fmaxf(M, ms[s]);
        }
        float num = 0.f, den = 0.f;
#pragma unroll
        for (int s = 0; s < NC; s++) {
            if (ms[s] == neg_inf()) continue;  // an empty run: its output was never written (0 * garbage may be NaN)
            const float w = __expf(ms[s] - M);
            num = fmaf(w, ld_cluster(&s_part[r * D + d], s), num);
            den = fmaf(w, ld_cluster(&s_part[R * D + 2 * r + 1], s), den);
        }
        out[out_index(r, grp, Hq, kvh) * D + d] = from_f<T>(num / den);
    }
    cluster_sync();
}

// grid T * Hq, block COMBINE_THREADS: merge the splits of each row, weighting each by exp(m_s - max m). The
// split maxima and weights are computed by all threads at once; then the threads form P = threads / (D / 4)
// groups, group p summing splits p, p + P, ... of its 4 output dims (float4 loads, all independent, so a
// row's partials stream in a few L2 round trips instead of one per split), and the P sums of each dim are
// added in group order (deterministic). Needs D % 4 == 0 and D / 4 <= COMBINE_THREADS.
constexpr int ATTN_MAX_SPLITS = 1024;
constexpr int COMBINE_THREADS = 256;
constexpr int COMBINE_EARLY = 8;  // partial outputs per thread requested before the split weights

// The attention output gate in the combine (attention_combine_gate_*): out[t, h, :] = o * sigmoid(gate[t, h, :]),
// o the merged row rounded to T as attention_combine stores it, then the product rounded as sigmoid_mul rounds it
// (elementwise.cuh), so the pair's bits come out of one launch. gate [T, Hq, D] has strides gts (token), ghs (head)
// and unit stride along D (a view into the q projection's output). xq / xg (one token, D % 128 == 0, else null): the
// gated row's fixed-point form for the quantised o projection: a warp a group (fixed_group32), the bits sigmoid_mul's
// fixed_group16 writes.
template <typename T>
struct CombineGate {
    const T *gate;
    int gts, ghs;
    unsigned char *xq;
    int2 *xg;
};

// EARLY: the entry point has not waited yet; the split count comes from the positions (written before the split
// kernel ran) before the wait, the partials after it. GATE: the output gate applied (CombineGate); its gate row, which
// the q projection wrote before the split kernel launched this one, is read before the wait.
template <typename T, bool EARLY = false, bool GATE = false>
__device__ __forceinline__ void attention_combine(const float *__restrict__ part_o, const float *__restrict__ part_ml,
                                                  const i64 *__restrict__ positions, T *__restrict__ out, int Hq,
                                                  int S, int C, int cmin, int D, CombineGate<T> cg = {}) {
    __shared__ float s_w[ATTN_MAX_SPLITS];
    __shared__ float scratch[32];
    __shared__ __align__(16) float s_sum[COMBINE_THREADS * 4];
    C = launch_split(C, cmin, S, positions[gridDim.x / Hq - 1]);  // as the split kernel did
    const i64 row = blockIdx.x;
    const int t = (int)(row / Hq);
    const int ns = min(S, (int)((positions[t] + C) / C));  // splits holding keys 0..positions[t]
    const int V = D / 4, P = (int)blockDim.x / V;
    const int v = threadIdx.x % V, p = threadIdx.x / V;
    const float4 *po = reinterpret_cast<const float4 *>(part_o + row * S * D) + v;
    // GATE: thread i < D / 4 (= V) takes outputs 4 i .. 4 i + 3, a warp a group of 128 (fixed_group32)
    uint2 graw = make_uint2(0u, 0u);
    if (GATE && (int)threadIdx.x < V)
        graw = *reinterpret_cast<const uint2 *>(cg.gate + (i64)t * cg.gts + (i64)(row % Hq) * cg.ghs + 4 * threadIdx.x);
    if (EARLY) pdl_enter();
#ifndef NINFER_ATTN_COMBINE_LATE
    // this thread's first partial outputs, requested with the maxima and sums rather than after their weights
    float4 x[COMBINE_EARLY];
#pragma unroll
    for (int k = 0; k < COMBINE_EARLY; k++)
        if (p < P && p + k * P < ns) x[k] = po[(i64)(p + k * P) * V];
#endif
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
    if (p < P) {
        float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
        int s = p;
#ifndef NINFER_ATTN_COMBINE_LATE
#pragma unroll
        for (int k = 0; k < COMBINE_EARLY; k++, s += P)
            if (s < ns) {
                const float w = s_w[s];
                num.x = fmaf(w, x[k].x, num.x);
                num.y = fmaf(w, x[k].y, num.y);
                num.z = fmaf(w, x[k].z, num.z);
                num.w = fmaf(w, x[k].w, num.w);
            }
#endif
#pragma unroll 8
        for (; s < ns; s += P) {  // splits past the early ones (long contexts)
            const float4 xs = po[(i64)s * V];
            const float w = s_w[s];
            num.x = fmaf(w, xs.x, num.x);
            num.y = fmaf(w, xs.y, num.y);
            num.z = fmaf(w, xs.z, num.z);
            num.w = fmaf(w, xs.w, num.w);
        }
        reinterpret_cast<float4 *>(s_sum)[p * V + v] = num;
    }
    __syncthreads();
    if (GATE) {
        const int i = threadIdx.x;
        if (i >= ((V + 31) & ~31)) return;  // whole warps stay (the form's shuffles)
        float f[4] = {0.f, 0.f, 0.f, 0.f};
        if (i < V) {
            float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);  // the partial sums in the plain loop's order (same bits)
            for (int q = 0; q < P; q++) {
                const float4 s4 = reinterpret_cast<const float4 *>(s_sum)[q * V + i];
                acc.x += s4.x;
                acc.y += s4.y;
                acc.z += s4.z;
                acc.w += s4.w;
            }
            const float a[4] = {acc.x, acc.y, acc.z, acc.w};
            const T *ge = reinterpret_cast<const T *>(&graw);
            uint2 packed;
            T *pe = reinterpret_cast<T *>(&packed);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float o = to_f(from_f<T>(a[e] / den));                  // as attention_combine stores it
                pe[e] = from_f<T>(o / (1.f + expf(-to_f(ge[e]))));            // as sigmoid_mul stores it
                f[e] = to_f(pe[e]);
            }
            reinterpret_cast<uint2 *>(out + row * D)[i] = packed;
        }
        if (cg.xq != nullptr) fixed_group32(f, (int)row * (D / 128) + i / 32, cg.xq, cg.xg, Hq * D);  // D % 128 == 0
        return;
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.f;
        for (int q = 0; q < P; q++) acc += s_sum[q * D + d];
        out[row * D + d] = from_f<T>(acc / den);
    }
}

}  // namespace ninfer
