// Quantised KV cache (ninfer.quant.kv_cache, semantics in ninfer.quant.kv_ops): the fused write and paged
// decode/verify attention reading int8 / int4 codes, dequantised in registers.
//
// Pool layout per (slot, kv head), groups of 64 elements:
//   int8: codes int8 [D], scale fp16 [D/64]:               x = c * s
//   int4: codes u8 [D/2] (even element in the low nibble), scale and offset fp16 [D/64]: x = u * s + m
// The write subtracts K's centre, applies the block Hadamard rotation (K; V where the pool says so) and
// quantises K and V in one launch. Attention rotates the query instead of un-rotating K ((qH).(kH) = q.k),
// and the partial outputs of a rotated V (sum p vH = (sum p v) H, the combine is linear).
//
// Dequantisation is folded into the dot products: codes become floats with two integer ops each
// (no conversion instruction) and the scale / offset are applied once per (key, 32-element slice):
//   int8: c = float(0x4B0000bb) - (2^23 + 128), bb = c ^ 0x80, exact;
//   int4: f = 1 + u/16 = float(0x3F800000 | u << 19), so q.(u s + m) = 16 s (q.f) + (m - 16 s) sum(q).
#pragma once
#include "attention.cuh"  // out_index, the partial-output layout attention_combine merges
#include "common.cuh"

namespace ninfer {

constexpr int KVQ_GROUP = 64;

// Normalised Sylvester Hadamard transform on blocks of `blk` (a power of two, at most 32 * E) of a
// vector held by a warp, E contiguous elements per lane (lane l holds [l E, l E + E)). Every lane calls it.
template <int E>
__device__ __forceinline__ void warp_fwht(float (&x)[E], int blk, int lane) {
#pragma unroll
    for (int h = 1; h < E; h <<= 1) {
        if (h < blk) {
#pragma unroll
            for (int i = 0; i < E; i++)
                if (!(i & h)) {
                    const float a = x[i], b = x[i + h];
                    x[i] = a + b;
                    x[i + h] = a - b;
                }
        }
    }
    for (int h = E; h < blk; h <<= 1) {
        const int m = h / E;
        const bool upper = lane & m;
#pragma unroll
        for (int i = 0; i < E; i++) {
            const float o = __shfl_xor_sync(0xffffffffu, x[i], m);
            x[i] = upper ? o - x[i] : x[i] + o;
        }
    }
    const float norm = 1.f / sqrtf((float)blk);
#pragma unroll
    for (int i = 0; i < E; i++) x[i] *= norm;
}

template <int NB>
__device__ __forceinline__ void store_bytes(unsigned char *p, unsigned long long v) {
    if (NB == 1) *p = (unsigned char)v;
    else if (NB == 2) *reinterpret_cast<unsigned short *>(p) = (unsigned short)v;
    else if (NB == 4) *reinterpret_cast<unsigned *>(p) = (unsigned)v;
    else *reinterpret_cast<unsigned long long *>(p) = v;
}

// Quantised write of T tokens. grid (T, ceil(2 Hk / warps)), a warp per vector: vectors 0..Hk-1 are the
// keys' heads, Hk..2Hk-1 the values'. k, v: [T, Hk, D] (rows at k_stride / v_stride elements); slots [T];
// kcenter: float32 [Hk, D] or null; rot_k / rot_v: the rotation block (0: none). Matches quantize_vectors:
// round half to even, the fp16 scale (and offset) rounded before the codes are computed with them.
template <typename T, int D>
__device__ __forceinline__ void kvq_write(const T *__restrict__ k, const T *__restrict__ v, unsigned char *kd,
                                          __half *ks, __half *ko, const float *__restrict__ kcenter,
                                          unsigned char *vd, __half *vs, __half *vo, const i64 *__restrict__ slots,
                                          int Hk, int k_stride, int v_stride, int bits, int rot_k, int rot_v) {
    constexpr int E = D / 32;         // elements per lane
    constexpr int NG = D / KVQ_GROUP;  // groups per vector
    constexpr int LG = KVQ_GROUP / E;  // lanes per group
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = blockIdx.x;
    const int vec = blockIdx.y * (blockDim.x / 32) + warp;
    if (vec >= 2 * Hk) return;  // warp-uniform
    const bool is_k = vec < Hk;
    const int h = is_k ? vec : vec - Hk;
    const T *src = (is_k ? k + (i64)t * k_stride : v + (i64)t * v_stride) + (i64)h * D + lane * E;
    float x[E];
#pragma unroll
    for (int i = 0; i < E; i++) x[i] = to_f(src[i]);
    if (is_k && kcenter != nullptr) {
#pragma unroll
        for (int i = 0; i < E; i++) x[i] -= kcenter[h * D + lane * E + i];
    }
    const int rot = is_k ? rot_k : rot_v;
    if (rot > 1) warp_fwht<E>(x, rot, lane);
    const i64 vrow = slots[t] * Hk + h;  // the (slot, head) row of the pool
    const i64 sidx = vrow * NG + lane / LG;
    unsigned char *data = is_k ? kd : vd;
    __half *scale = is_k ? ks : vs;
    if (bits == 8) {
        float a = 0.f;
#pragma unroll
        for (int i = 0; i < E; i++) a = fmaxf(a, fabsf(x[i]));
#pragma unroll
        for (int o = LG / 2; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
        __half sh = __float2half_rn(__fdiv_rn(a, 127.f));
        float s = __half2float(sh);
        if (s == 0.f) {
            s = 1.f;
            sh = __float2half_rn(1.f);
        }
        unsigned long long packed = 0;
#pragma unroll
        for (int i = 0; i < E; i++) {
            const float c = fminf(fmaxf(rintf(__fdiv_rn(x[i], s)), -127.f), 127.f);
            packed |= (unsigned long long)((unsigned)(int)c & 0xFFu) << (8 * i);
        }
        store_bytes<E>(data + vrow * D + lane * E, packed);
        if (lane % LG == 0) scale[sidx] = sh;
    } else {
        float lo = x[0], hi = x[0];
#pragma unroll
        for (int i = 1; i < E; i++) {
            lo = fminf(lo, x[i]);
            hi = fmaxf(hi, x[i]);
        }
#pragma unroll
        for (int o = LG / 2; o > 0; o >>= 1) {
            lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
            hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
        }
        const __half mh = __float2half_rn(lo);
        const float m = __half2float(mh);
        __half sh = __float2half_rn(__fdiv_rn(hi - m, 15.f));
        float s = __half2float(sh);
        if (s == 0.f) {
            s = 1.f;
            sh = __float2half_rn(1.f);
        }
        unsigned long long packed = 0;
#pragma unroll
        for (int i = 0; i < E; i++) {
            const float u = fminf(fmaxf(rintf(__fdiv_rn(x[i] - m, s)), 0.f), 15.f);
            packed |= (unsigned long long)(unsigned)(int)u << (4 * i);
        }
        store_bytes<E / 2>(data + vrow * (D / 2) + lane * (E / 2), packed);
        if (lane % LG == 0) {
            scale[sidx] = sh;
            (is_k ? ko : vo)[sidx] = mh;
        }
    }
}

// int4 code k (0..7) of a 32-bit word as 1 + u/16: the nibble moved to mantissa bits 19..22.
template <int K>
__device__ __forceinline__ float nib_f(unsigned w) {
    const unsigned s = K * 4 <= 19 ? (w << (19 - K * 4)) : (w >> (K * 4 - 19));
    return __uint_as_float((s & 0x00780000u) | 0x3F800000u);
}

// int8 code k (0..3) of a word whose bytes were XORed with 0x80, as an exact float.
template <int K>
__device__ __forceinline__ float byte_f(unsigned t) {
    return __uint_as_float(__byte_perm(t, 0x4B000000u, 0x7540u | K)) - 8388736.f;
}

template <int I>
__device__ __forceinline__ unsigned word_of(const uint4 &v) {
    return I == 0 ? v.x : I == 1 ? v.y : I == 2 ? v.z : v.w;
}

// Codes 4 Q .. 4 Q + 3 of a lane's 16 bytes as floats: int4 (Q < 8) as 1 + u/16, int8 (Q < 4) exact.
template <int BITS, int Q>
__device__ __forceinline__ void codes4(const uint4 &raw, float *f) {
    if (BITS == 4) {
        const unsigned x = word_of<Q / 2>(raw);
        if (Q % 2 == 0) {
            f[0] = nib_f<0>(x); f[1] = nib_f<1>(x); f[2] = nib_f<2>(x); f[3] = nib_f<3>(x);
        } else {
            f[0] = nib_f<4>(x); f[1] = nib_f<5>(x); f[2] = nib_f<6>(x); f[3] = nib_f<7>(x);
        }
    } else {
        const unsigned t = word_of<Q>(raw) ^ 0x80808080u;
        f[0] = byte_f<0>(t); f[1] = byte_f<1>(t); f[2] = byte_f<2>(t); f[3] = byte_f<3>(t);
    }
}

// Phase 1's inner step: codes 4 Q .. 4 Q + 3 of UNRK keys against R query rows (float4s at qrow + r * QS).
template <int BITS, int Q, int UNRK, int R, int QS>
__device__ __forceinline__ void score_quad(const uint4 (&raw)[UNRK], const float *qrow, float (&d)[UNRK][R]) {
    float f[UNRK][4];
#pragma unroll
    for (int u = 0; u < UNRK; u++) codes4<BITS, Q>(raw[u], f[u]);
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float4 qv = *reinterpret_cast<const float4 *>(qrow + r * QS + Q * 4);
#pragma unroll
        for (int u = 0; u < UNRK; u++) {
            d[u][r] = fmaf(qv.x, f[u][0], d[u][r]);
            d[u][r] = fmaf(qv.y, f[u][1], d[u][r]);
            d[u][r] = fmaf(qv.z, f[u][2], d[u][r]);
            d[u][r] = fmaf(qv.w, f[u][3], d[u][r]);
        }
    }
}

__device__ __forceinline__ int kvq_pad(int i) { return i + (i / 32) * 4; }  // s_q: 4 floats after every 32

// Shared memory of one attention block: phases 0-3 use the first struct, the final merge of the warps'
// partial outputs reuses the same bytes (s_o).
template <int D, int R, int CMAX, int NW>
struct KvqSmem {
    struct Main {
        float q[R][D + D / 8];   // query rows (rotated, times scale), padded against bank conflicts
        float qs[R][D / 32];     // sums of q over each 32-element slice (int4's offset term)
        float p[R][CMAX];        // scores, then probabilities
        float pt[CMAX][R];       // probabilities by key (phase 3 reads R of them as float4s)
    };
    union {
        Main m;
        float o[NW][R][D];
    };
    int slot[CMAX];  // pool slot of each key of the split
};

// grid (ceil(T G / R), Hk, S), block NW * 32: one block per (chunk of R query rows, kv head, split of C
// keys), partial outputs and (max, sum) per row and split as attention_split writes them (merged by
// attention_combine). q: [T, Hq, D] (rows at q_stride); rot_q: K's rotation block (0: none), applied to q;
// rot_o: V's (0: none), applied to the partial outputs.
template <typename T, int D, int BITS, int R, int CMAX, int NW>
__device__ __forceinline__ void kvq_attention_split(
    const T *__restrict__ q, const unsigned char *__restrict__ kd, const __half *__restrict__ ks,
    const __half *__restrict__ ko, const unsigned char *__restrict__ vd, const __half *__restrict__ vs,
    const __half *__restrict__ vo, const int *__restrict__ block_table, const i64 *__restrict__ positions,
    float *__restrict__ part_o, float *__restrict__ part_ml, int ntok, int Hq, int Hk, int bs, int S, int C,
    int q_stride, float scale, int rot_q, int rot_o) {
    constexpr int NG = D / KVQ_GROUP;
    constexpr int RB = D * BITS / 8;        // code bytes per key row
    constexpr int GK = D / 32;              // phase 1: lanes per key, 32 codes each
    constexpr int KPWK = 32 / GK;           // keys per warp step
    constexpr int BK = 32 * BITS / 8;       // bytes per lane per key (16 or 32)
    constexpr int UNRK = BITS == 4 ? 4 : 2; // keys per lane in flight
    constexpr int GV = D / 8;               // phase 3: lanes per key, 8 codes each
    constexpr int KPWV = 32 / GV;
    constexpr int BV = BITS;                // bytes per lane per key (4 or 8)
    constexpr int UNRV = BITS == 4 ? 8 : 4;
    __shared__ __align__(16) KvqSmem<D, R, CMAX, NW> sm;

    const int kvh = blockIdx.y, split = blockIdx.z;
    const int grp = Hq / Hk;
    const int row0 = blockIdx.x * R;
    const int nr = min(R, ntok * grp - row0);
    const int key0 = split * C;
    const int t_last = (row0 + nr - 1) / grp;
    const int nkeys = min(C, (int)(positions[t_last] + 1) - key0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (nkeys <= 0) {  // this split lies past every row's context: mark it empty
        for (int r = threadIdx.x; r < nr; r += blockDim.x) {
            const i64 o = out_index(row0 + r, grp, Hq, kvh);
            part_ml[(o * S + split) * 2] = neg_inf();
            part_ml[(o * S + split) * 2 + 1] = 0.f;
        }
        return;
    }
    int lim[R];  // local key j is visible to row r iff j <= lim[r]
#pragma unroll
    for (int r = 0; r < R; r++) lim[r] = (int)positions[(row0 + min(r, nr - 1)) / grp] - key0;

    // phase 0: the keys' slots; the query rows (rows past nr repeat the last: computed, never written), a warp
    // per row, E elements per lane: rotated in registers (warp_fwht, the butterflies kvq_write applied to K),
    // times the scale, and (int4) their sums over each 32-element slice, with no block-wide pass per stage.
    for (int j = threadIdx.x; j < nkeys; j += blockDim.x) {
        const int key = key0 + j;
        sm.slot[j] = block_table[key / bs] * bs + key % bs;
    }
    {
        constexpr int E = D / 32;  // elements per lane
        constexpr int LS = 32 / E;  // lanes per 32-element slice
        for (int r = warp; r < R; r += NW) {
            const int row = row0 + min(r, nr - 1);
            const T *src = q + (i64)(row / grp) * q_stride + (i64)(kvh * grp + row % grp) * D + lane * E;
            float x[E];
#pragma unroll
            for (int i = 0; i < E; i++) x[i] = to_f(src[i]);
            if (rot_q > 1) warp_fwht<E>(x, rot_q, lane);
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < E; i++) {
                x[i] *= scale;
                sm.m.q[r][kvq_pad(lane * E + i)] = x[i];
                sum += x[i];
            }
            if (BITS == 4) {
#pragma unroll
                for (int o = LS / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
                if (lane % LS == 0) sm.m.qs[r][lane / LS] = sum;
            }
        }
    }
    __syncthreads();

    // phase 1: scores s[r][j] = q_r . k_j (q already scaled), K dequantised in registers
    {
        const int gl = lane % GK, sub = lane / GK;
        float qs[R];
#pragma unroll
        for (int r = 0; r < R; r++) qs[r] = BITS == 4 ? sm.m.qs[r][gl] : 0.f;
        for (int jb = warp * KPWK; jb < nkeys; jb += NW * KPWK * UNRK) {  // warp-uniform (shuffles below)
            uint4 raw[BK / 16][UNRK];
            float sc[UNRK], of[UNRK];
#pragma unroll
            for (int u = 0; u < UNRK; u++) {
                const int j = min(jb + u * NW * KPWK + sub, nkeys - 1);
                const i64 row = (i64)sm.slot[j] * Hk + kvh;
                const uint4 *src = reinterpret_cast<const uint4 *>(kd + row * RB + gl * BK);
#pragma unroll
                for (int c = 0; c < BK / 16; c++) raw[c][u] = __ldg(src + c);
                sc[u] = __half2float(ks[row * NG + gl / 2]);
                of[u] = BITS == 4 ? __half2float(ko[row * NG + gl / 2]) : 0.f;
            }
            float d[UNRK][R];
#pragma unroll
            for (int u = 0; u < UNRK; u++)
#pragma unroll
                for (int r = 0; r < R; r++) d[u][r] = 0.f;
            constexpr int QS = D + D / 8;
            const float *qrow = &sm.m.q[0][0] + gl * 36;  // kvq_pad(gl * 32)
            score_quad<BITS, 0, UNRK, R, QS>(raw[0], qrow, d);
            score_quad<BITS, 1, UNRK, R, QS>(raw[0], qrow, d);
            score_quad<BITS, 2, UNRK, R, QS>(raw[0], qrow, d);
            score_quad<BITS, 3, UNRK, R, QS>(raw[0], qrow, d);
            if (BITS == 4) {
                score_quad<BITS, 4, UNRK, R, QS>(raw[0], qrow, d);
                score_quad<BITS, 5, UNRK, R, QS>(raw[0], qrow, d);
                score_quad<BITS, 6, UNRK, R, QS>(raw[0], qrow, d);
                score_quad<BITS, 7, UNRK, R, QS>(raw[0], qrow, d);
            } else {  // the second 16 bytes: elements 16..31 of the slice
                score_quad<BITS, 0, UNRK, R, QS>(raw[BK / 16 - 1], qrow + 16, d);
                score_quad<BITS, 1, UNRK, R, QS>(raw[BK / 16 - 1], qrow + 16, d);
                score_quad<BITS, 2, UNRK, R, QS>(raw[BK / 16 - 1], qrow + 16, d);
                score_quad<BITS, 3, UNRK, R, QS>(raw[BK / 16 - 1], qrow + 16, d);
            }
#pragma unroll
            for (int u = 0; u < UNRK; u++) {
                const int j = jb + u * NW * KPWK + sub;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float x = BITS == 4 ? fmaf(16.f * sc[u], d[u][r], (of[u] - 16.f * sc[u]) * qs[r])
                                        : sc[u] * d[u][r];
#pragma unroll
                    for (int o = GK / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
                    if (gl == 0 && r < nr && j < nkeys) sm.m.p[r][j] = j <= lim[r] ? x : neg_inf();
                }
            }
        }
    }
    __syncthreads();

    // phase 2: per row max, probabilities and their sum; the probabilities also by key for phase 3
    for (int r = warp; r < R; r += NW) {
        if (r >= nr) {
            for (int j = lane; j < nkeys; j += 32) sm.m.pt[j][r] = 0.f;
            continue;
        }
        float m = neg_inf();
        for (int j = lane; j < nkeys; j += 32) m = fmaxf(m, sm.m.p[r][j]);
        m = warp_max(m);
        float l = 0.f;
        for (int j = lane; j < nkeys; j += 32) {
            const float p = m == neg_inf() ? 0.f : __expf(sm.m.p[r][j] - m);
            sm.m.pt[j][r] = p;
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

    // phase 3: o[r] = sum_j p[r][j] v_j, V dequantised in registers (int4: o = sum_j (16 p s_j) f_j plus
    // sum_j p (m_j - 16 s_j) added once per output element)
    float acc[R][8];
    {
        const int gv = lane % GV, subv = lane / GV;
        float bias[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            bias[r] = 0.f;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[r][i] = 0.f;
        }
        for (int jb = warp * KPWV; jb < nkeys; jb += NW * KPWV * UNRV) {
            uint4 raw[UNRV];  // .x (int4) or .x, .y (int8): the lane's 8 codes
            float sc[UNRV], of[UNRV];
#pragma unroll
            for (int u = 0; u < UNRV; u++) {
                const int j = min(jb + u * NW * KPWV + subv, nkeys - 1);
                const i64 row = (i64)sm.slot[j] * Hk + kvh;
                if (BITS == 4) {
                    raw[u].x = __ldg(reinterpret_cast<const unsigned *>(vd + row * RB + gv * BV));
                    raw[u].y = 0u;
                } else {
                    const uint2 w = __ldg(reinterpret_cast<const uint2 *>(vd + row * RB + gv * BV));
                    raw[u].x = w.x;
                    raw[u].y = w.y;
                }
                raw[u].z = raw[u].w = 0u;
                sc[u] = __half2float(vs[row * NG + gv / 8]);
                of[u] = BITS == 4 ? __half2float(vo[row * NG + gv / 8]) : 0.f;
            }
#pragma unroll
            for (int u = 0; u < UNRV; u++) {
                const int j = jb + u * NW * KPWV + subv;
                if (j >= nkeys) continue;
                float f[8];
                codes4<BITS, 0>(raw[u], f);
                codes4<BITS, 1>(raw[u], f + 4);
                const float a = BITS == 4 ? 16.f * sc[u] : sc[u];
                const float b = of[u] - 16.f * sc[u];
                float p[R];
#pragma unroll
                for (int r = 0; r < R; r += 4) {
                    const float4 pv = *reinterpret_cast<const float4 *>(&sm.m.pt[j][r]);
                    p[r] = pv.x; p[r + 1] = pv.y; p[r + 2] = pv.z; p[r + 3] = pv.w;
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float w = p[r] * a;
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r][i] = fmaf(w, f[i], acc[r][i]);
                    if (BITS == 4) bias[r] = fmaf(p[r], b, bias[r]);
                }
            }
        }
        if (BITS == 4) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r][i] += bias[r];
        }
#pragma unroll
        for (int o = GV; o < 32; o <<= 1)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r][i] += __shfl_xor_sync(0xffffffffu, acc[r][i], o);
    }
    __syncthreads();  // phases 0-3 are done with sm.m: sm.o reuses its bytes
    if (lane < GV) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int i = 0; i < 8; i++) sm.o[warp][r][lane * 8 + i] = acc[r][i];
    }
    __syncthreads();
    {  // a warp per row: the warps' partial outputs summed in a fixed order, V's rotation undone in registers
        constexpr int E = D / 32;
        for (int r = warp; r < nr; r += NW) {
            float x[E];
#pragma unroll
            for (int i = 0; i < E; i++) {
                float s = 0.f;
#pragma unroll
                for (int w = 0; w < NW; w++) s += sm.o[w][r][lane * E + i];
                x[i] = s;
            }
            if (rot_o > 1) warp_fwht<E>(x, rot_o, lane);
            const i64 o = out_index(row0 + r, grp, Hq, kvh);
#pragma unroll
            for (int i = 0; i < E; i++) part_o[(o * S + split) * D + lane * E + i] = x[i];
        }
    }
}

// Prefill over a quantised cache (more than 16 query tokens): the sequence's blocks dequantised into a dense
// [nblk, bs, Hk, D] in T for torch SDPA, in one launch instead of torch ops through float32 temporaries. A thread
// takes 8 values of one (block, token, head) row (one 16-byte store): int8 c * s, int4 u * s + o (two roundings, as
// kv_ops._gather computes them in float32), rounded once to T; still rotated where the pool rotates, and K without
// its centre (a constant per query row, which softmax ignores). Needs D % 8 == 0 and group % 8 == 0.
template <typename T, int BITS>
__device__ __forceinline__ void kvq_gather(const unsigned char *__restrict__ data, const __half *__restrict__ sc,
                                           const __half *__restrict__ of, const long long *__restrict__ blocks,
                                           T *__restrict__ out, int nblk, int rows, int D, int group) {
    const int per_row = D / 8;
    const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= (i64)nblk * rows * per_row) return;
    const i64 row = v / per_row;  // (block of the sequence, token, head)
    const int d0 = (int)(v - row * per_row) * 8;
    const i64 bi = row / rows;
    const i64 src = blocks[bi] * rows + (row - bi * rows);  // its row in the pool
    const i64 gi = src * (D / group) + d0 / group;
    const float s = __half2float(sc[gi]);
    float f[8];
    if (BITS == 8) {
        const uint2 c = *reinterpret_cast<const uint2 *>(data + src * D + d0);
#pragma unroll
        for (int j = 0; j < 8; j++)
            f[j] = __fmul_rn((float)(signed char)(((j < 4 ? c.x : c.y) >> (8 * (j % 4))) & 0xFFu), s);
    } else {
        const unsigned c = *reinterpret_cast<const unsigned *>(data + src * (D / 2) + d0 / 2);
        const float o = __half2float(of[gi]);
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = __fadd_rn(__fmul_rn((float)((c >> (4 * j)) & 0xFu), s), o);
    }
    *reinterpret_cast<uint4 *>(out + row * D + d0) = pack8<T>(f);
}

}  // namespace ninfer

// Entry points for one dtype: the write per head_dim, attention per (head_dim, bits, rows per block).
#define NINFER_KVQ_WRITE(S, T, D)                                                                       \
    extern "C" __global__ void kvq_write_##S##_d##D(                                                    \
        const T *k, const T *v, unsigned char *kd, __half *ks, __half *ko, const float *kc,             \
        unsigned char *vd, __half *vs, __half *vo, const long long *slots, int Hk, int k_stride,        \
        int v_stride, int bits, int rot_k, int rot_v) {                                                 \
        ninfer::pdl_enter();                                                                            \
        ninfer::kvq_write<T, D>(k, v, kd, ks, ko, kc, vd, vs, vo, slots, Hk, k_stride, v_stride, bits,  \
                                rot_k, rot_v);                                                          \
    }

// Blocks of the attention kernel that must fit an SM at once, by rows per block: the register cap. Uncapped,
// the 8-row int4 kernel at head_dim 256 took 168 registers, 3 blocks of 128 threads per SM, so the 512 blocks
// of a 27B-shaped (4 kv heads) decode step at 32K (128 splits) ran in two waves on 132 SMs; at 128 registers
// (no spills, ptxas) 4 fit and they run in one. The 4-row kernels keep the 5 per SM they had at 96.
#ifndef NINFER_KVQ_MIN_BLOCKS_R8
#define NINFER_KVQ_MIN_BLOCKS_R8 4
#endif
#ifndef NINFER_KVQ_MIN_BLOCKS_R4
#define NINFER_KVQ_MIN_BLOCKS_R4 5
#endif

#define NINFER_KVQ_ATTN(S, T, D, BITS, R)                                                               \
    extern "C" __global__ void __launch_bounds__(NINFER_ATTN_WARPS * 32, NINFER_KVQ_MIN_BLOCKS_R##R)      \
        kvq_attention_##S##_d##D##_b##BITS##_r##R(                                                      \
            const T *q, const unsigned char *kd, const __half *ks, const __half *ko,                    \
            const unsigned char *vd, const __half *vs, const __half *vo, const int *bt,                 \
            const long long *pos, float *po, float *pml, int ntok, int Hq, int Hk, int bs, int S_,      \
            int C, int q_stride, float scale, int rot_q, int rot_o) {                                   \
        ninfer::pdl_enter();                                                                           \
        ninfer::kvq_attention_split<T, D, BITS, R, NINFER_ATTN_CMAX, NINFER_ATTN_WARPS>(               \
            q, kd, ks, ko, vd, vs, vo, bt, pos, po, pml, ntok, Hq, Hk, bs, S_, C, q_stride, scale,      \
            rot_q, rot_o);                                                                              \
    }

#define NINFER_KVQ_ATTN_D(S, T, D) \
    NINFER_KVQ_ATTN(S, T, D, 8, 4) NINFER_KVQ_ATTN(S, T, D, 8, 8) \
    NINFER_KVQ_ATTN(S, T, D, 4, 4) NINFER_KVQ_ATTN(S, T, D, 4, 8)

#define NINFER_KVQ_GATHER(S, T, BITS)                                                                   \
    extern "C" __global__ void __launch_bounds__(256) kvq_gather_##S##_b##BITS(                         \
        const unsigned char *data, const __half *sc, const __half *of, const long long *blocks, T *out, \
        int nblk, int rows, int D, int group) {                                                         \
        ninfer::pdl_enter();                                                                            \
        ninfer::kvq_gather<T, BITS>(data, sc, of, blocks, out, nblk, rows, D, group);                   \
    }

#define NINFER_KVQ_KERNELS(S, T)                                                                        \
    NINFER_KVQ_WRITE(S, T, 64) NINFER_KVQ_WRITE(S, T, 128) NINFER_KVQ_WRITE(S, T, 256)                  \
    NINFER_KVQ_ATTN_D(S, T, 64) NINFER_KVQ_ATTN_D(S, T, 128) NINFER_KVQ_ATTN_D(S, T, 256)               \
    NINFER_KVQ_GATHER(S, T, 8) NINFER_KVQ_GATHER(S, T, 4)
