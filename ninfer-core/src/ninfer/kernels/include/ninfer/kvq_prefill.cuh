// Prefill attention over a quantised KV cache (more than 16 query tokens), the codes dequantised inside the
// attention kernel: no dense copy of the context. A flash-attention forward on mma.sync m16n8k16 (sm_80+; Turing's
// form below):
//   - a block takes BM = 16 NW query rows of one kv head (NW warps), rows (token, head of the group) as the decode
//     kernels number them, so the group's query heads share each dequantised key tile;
//   - per tile of BN keys: the tile's codes, scales and offsets were copied into a shared staging area (cp.async,
//     paged through the block table) while the previous tile was multiplied; the block dequantises them into fp16
//     shared rows (int8 c * s, int4 u * s + o, each rounded once to fp16, two values a half2 instruction), then
//     starts the next tile's copies;
//   - the products run in fp16 whatever the query's dtype (bf16 queries are converted as they are loaded: exact
//     within fp16's range, |x| < 65504, as are the dequantised keys and values; fp16 keeps 3 more bits than bf16).
//     On the H200 this beat tiles in the query's dtype with float32 dequantisation by 7-15 % (bench/RESULTS.md,
//     2026-12-04 session 13, call 6);
//   - each warp multiplies its 16 query rows by the tile (ldmatrix fragments), keeps the running max of the raw
//     scores and the sum in float32 (2^(s * scale * log2 e - max * scale * log2 e), one FFMA and one MUFU), and adds
//     P V into its float32 output rows.
// The query arrives rotated where the pool rotates K; the output leaves rotated where it rotates V (the launcher
// applies both rotations, as the decode path's sum p vH = (sum p v) H). K is stored without its centre: a
// constant per query row, which softmax ignores. Key j is visible to the row of token t iff j <= positions[t].
// Turing (sm_75; NINFER_MMA_K8, which the sm75 backend defines, builds this form for any arch, so that it runs and is
// tested on newer GPUs too): each m16n8k16 product as two m16n8k8, the staging copied by plain loads and stores (no
// cp.async: a tile's codes are read when the previous tile is done, not during its products), and tiles of 32 keys
// (16 at head_dim 256) so that a block's shared memory fits Turing's 64 KB.
#pragma once
#include "common.cuh"

#if defined(NINFER_MMA_K8) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
#define NINFER_KVQP_TURING 1
#else
#define NINFER_KVQP_TURING 0
#endif

namespace ninfer {

// 32-bit words staged per key for its fp16 scales (and offsets): from the even element at or below its first
__host__ __device__ constexpr int kvqp_scale_words(int D) { return D == 64 ? 1 : D / 128; }

template <int D, int NW>
struct KvqPrefillShape {
    static constexpr int BM = 16 * NW;             // query rows per block: NW warps of 16
    static constexpr int BN = NINFER_KVQP_TURING ? (D == 256 ? 16 : 32)  // keys per tile (Turing: 64 KB a block)
                              : D == 256 && NW == 4 ? 32 : 64;       // (4 warps at 256: 99 KB a block)
    static constexpr int LD = D + 8;               // 16-bit elements per shared row: +16 bytes, conflict-free
    static constexpr int THREADS = 32 * NW;
    // Dynamic shared memory (ninfer.kernels.kv_quant.prefill_smem computes its size): the query rows and one tile of
    // K and of V dequantised ([BM + 2 BN][LD] fp16), then the next tile's staging (KvqStage).
};

template <typename A, typename B>
struct KvqSame {
    static constexpr bool value = false;
};
template <typename A>
struct KvqSame<A, A> {
    static constexpr bool value = true;
};
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi);
template <>
__device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned *>(&v);
}
template <>
__device__ __forceinline__ unsigned pack2<__half>(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned *>(&v);
}

// d += A (16x16, row) B (16x8, col), fp16 operands, float32 accumulators
__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if NINFER_KVQP_TURING && __CUDA_ARCH__ >= 750  // k 0..7 (a0, a1; b0), then k 8..15 (a2, a3; b1)
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b1));
#elif __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
template <bool TRANS>
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const void *p) {
#if __CUDA_ARCH__ >= 750
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}

// 2^x, one MUFU instruction (exp2f adds a denormal guard around it); 2^-inf = 0
__device__ __forceinline__ float kvqp_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int N>  // N = 4, 8 or 16 bytes into shared memory, asynchronously (Turing: a load and a store)
__device__ __forceinline__ void kvqp_cp(void *dst, const void *src) {
#if NINFER_KVQP_TURING
    if (N == 16)
        *reinterpret_cast<uint4 *>(dst) = __ldg(reinterpret_cast<const uint4 *>(src));
    else if (N == 8)
        *reinterpret_cast<uint2 *>(dst) = __ldg(reinterpret_cast<const uint2 *>(src));
    else
        *reinterpret_cast<unsigned *>(dst) = __ldg(reinterpret_cast<const unsigned *>(src));
#elif __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(N) : "memory");
#endif
}

__device__ __forceinline__ void kvqp_commit() {
#if !NINFER_KVQP_TURING && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

__device__ __forceinline__ void kvqp_wait() {
#if !NINFER_KVQP_TURING && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

// Shared staging of one tile's codes as the pool holds them: K's and V's code rows [BN][RB], their scales
// and offsets as the SW 32-bit words from the even fp16 element at or below the key's first ([BN][SW] each), and
// per key the parity of that first element.
template <int D, int BITS, int BN>
struct KvqStage {
    static constexpr int SW = kvqp_scale_words(D), RB = D * BITS / 8;
    unsigned char *rk, *rv;
    unsigned *sk, *ok, *sv, *ov;
    int *par;
    __device__ __forceinline__ explicit KvqStage(unsigned char *p) {
        rk = p;
        rv = rk + BN * RB;
        sk = reinterpret_cast<unsigned *>(rv + BN * RB);
        ok = sk + BN * SW;
        sv = ok + BN * SW;
        ov = sv + BN * SW;
        par = reinterpret_cast<int *>(ov + BN * SW);
    }
};

// Issue the copies of tile key0's codes, scales and offsets into the staging (one commit group). A thread copies
// the same 16-byte piece c of keys j0, j0 + NT / CPR, ...: its addresses step by constants. bs = 1 << bs_shift.
template <int D, int BITS, int BN, int NT>
__device__ __forceinline__ void kvq_stage_issue(const KvqStage<D, BITS, BN> &st, const unsigned char *__restrict__ kd,
                                                const __half *ks, const __half *ko, const unsigned char *vd,
                                                const __half *vs, const __half *vo, const int *__restrict__ block_table,
                                                int key0, int last, int bs_shift, int Hk, int kvh) {
    using St = KvqStage<D, BITS, BN>;
    constexpr int RB = St::RB, SW = St::SW, CPR = RB / 16, NG = D / 64, KPP = NT / CPR;  // keys a pass
    static_assert(NT % CPR == 0, "pieces a key divide the block");
    const int c = threadIdx.x % CPR, j0 = threadIdx.x / CPR;
#pragma unroll
    for (int i = 0; i < (BN + KPP - 1) / KPP; i++) {
        const int j = j0 + i * KPP;
        if (BN % KPP == 0 || j < BN) {
            const int key = min(key0 + j, last);
            const i64 row = ((i64)block_table[key >> bs_shift] << bs_shift | (key & ((1 << bs_shift) - 1))) * Hk + kvh;
            kvqp_cp<16>(st.rk + j * RB + c * 16, kd + row * RB + c * 16);
            kvqp_cp<16>(st.rv + j * RB + c * 16, vd + row * RB + c * 16);
            if (c == 0) {
                const i64 e0 = (row * NG) & ~1LL;  // 4-byte aligned
                if (NG == 1) st.par[j] = (int)(row & 1);
                kvqp_cp<SW * 4>(st.sk + j * SW, ks + e0);
                kvqp_cp<SW * 4>(st.sv + j * SW, vs + e0);
                if (BITS == 4) {
                    kvqp_cp<SW * 4>(st.ok + j * SW, ko + e0);
                    kvqp_cp<SW * 4>(st.ov + j * SW, vo + e0);
                }
            }
        }
    }
    kvqp_commit();
}

// 8 codes of one staged key dequantised in fp16, two values a half2 instruction: int8 c * s and int4 u * s + o, each
// rounded once to fp16 (s, o are the pool's fp16; kv_ops._gather computes them in float32). The code goes into a half's mantissa under the
// exponent of 1024 (0x64bb = 1024 + bb; an int4 pair (lo, hi) through one PRMT and one LOP3), less 1152 (int8, the
// byte offset by 128) or 1024 (int4), exactly.
template <int BITS>
__device__ __forceinline__ uint4 kvq_deq8h(const unsigned char *raw, __half s, __half o) {
    uint4 r;
    unsigned *h = reinterpret_cast<unsigned *>(&r);
    const __half2 s2 = __half2half2(s);
    if (BITS == 8) {
        const uint2 w = *reinterpret_cast<const uint2 *>(raw);
        const unsigned t[2] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u};
        const __half2 base = __float2half2_rn(1152.f);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const unsigned m = __byte_perm(t[i / 2], 0x64646464u, i % 2 ? 0x7362u : 0x5140u);
            const __half2 v = __hmul2(__hsub2(*reinterpret_cast<const __half2 *>(&m), base), s2);
            h[i] = *reinterpret_cast<const unsigned *>(&v);
        }
    } else {
        const unsigned w = *reinterpret_cast<const unsigned *>(raw), w4 = w >> 4;
        const __half2 base = __float2half2_rn(1024.f), o2 = __half2half2(o);
#pragma unroll
        for (int i = 0; i < 4; i++) {  // byte i holds elements 2i (low nibble) and 2i + 1
            const unsigned m = (__byte_perm(w, w4, (unsigned)(i | i << 4 | (4 + i) << 8 | (4 + i) << 12)) & 0x000F000Fu)
                               | 0x64006400u;
            const __half2 v = __hfma2(__hsub2(*reinterpret_cast<const __half2 *>(&m), base), s2, o2);
            h[i] = *reinterpret_cast<const unsigned *>(&v);
        }
    }
    return r;
}

// The staged tile (K and V) dequantised into shared rows [BN][LD] of T. A thread takes the same 8 elements c of
// keys j0, j0 + NT / PR, ...: constant address steps, one scale (and offset) index.
template <int D, int BITS, int BN, int LD, int NT>
__device__ __forceinline__ void kvq_stage_dequant(__half *dk, __half *dv, const KvqStage<D, BITS, BN> &st) {
    constexpr int SW = kvqp_scale_words(D), PR = D / 8, KPP = NT / PR, RB = D * BITS / 8, NG = D / 64;
    static_assert(NT % PR == 0, "kvq_stage_dequant shape");
    const int c = (threadIdx.x % PR) * 8, j0 = threadIdx.x / PR;
#pragma unroll
    for (int i = 0; i < (BN + KPP - 1) / KPP; i++) {
        const int j = j0 + i * KPP;
        if (BN % KPP != 0 && j >= BN)
            break;
        const int gi = (NG == 1 ? st.par[j] : 0) + c / 64;  // NG >= 2: the key's first scale is even
        const __half *sk = reinterpret_cast<const __half *>(st.sk + j * SW);
        const __half *sv = reinterpret_cast<const __half *>(st.sv + j * SW);
        const __half *ok = reinterpret_cast<const __half *>(st.ok + j * SW);
        const __half *ov = reinterpret_cast<const __half *>(st.ov + j * SW);
        *reinterpret_cast<uint4 *>(dk + j * LD + c) =
            kvq_deq8h<BITS>(st.rk + j * RB + c * BITS / 8, sk[gi], BITS == 4 ? ok[gi] : sk[gi]);
        *reinterpret_cast<uint4 *>(dv + j * LD + c) =
            kvq_deq8h<BITS>(st.rv + j * RB + c * BITS / 8, sv[gi], BITS == 4 ? ov[gi] : sv[gi]);
    }
}

// grid (ceil(T G / BM), Hk), KvqPrefillShape<D, NW>::THREADS threads, kv_quant.prefill_smem bytes of dynamic shared
// memory.
// q: [T, Hq, D] (rows at q_stride elements, 16-byte aligned); out: [T, Hq, D] contiguous; positions [T];
// bs_shift: log2 of the pool's block size; scale_log2: the softmax scale times log2(e). Key j is visible to the row of token t iff j <= positions[t],
// in any order of positions.
template <typename T, int D, int BITS, int NW>
__device__ __forceinline__ void kvq_prefill(unsigned char *smem, const T *__restrict__ q,
                                            const unsigned char *__restrict__ kd, const __half *__restrict__ ks,
                                            const __half *__restrict__ ko, const unsigned char *__restrict__ vd,
                                            const __half *__restrict__ vs, const __half *__restrict__ vo,
                                            const int *__restrict__ block_table, const i64 *__restrict__ positions,
                                            T *__restrict__ out, int ntok, int Hq, int Hk, int bs_shift,
                                            int q_stride, float scale_log2) {
#if __CUDA_ARCH__ >= 800 || (NINFER_KVQP_TURING && __CUDA_ARCH__ >= 750)
    using Sh = KvqPrefillShape<D, NW>;
    constexpr int BM = Sh::BM, BN = Sh::BN, LD = Sh::LD, NT = Sh::THREADS;
    using C = __half;  // the tiles and the products' operands (bf16 queries converted: exact within fp16's range)
    C *sq = reinterpret_cast<C *>(smem);  // [BM][LD]
    C *sk = sq + BM * LD;                 // [BN][LD]
    C *sv = sk + BN * LD;                 // [BN][LD]
    const int kvh = blockIdx.y, grp = Hq / Hk;
    const int nrows = ntok * grp;
    const int row0 = (gridDim.x - 1 - blockIdx.x) * BM;  // the longest rows (the causal triangle's foot) first
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t4 = lane & 3;
    __shared__ int lims[2];  // the least and the greatest position of the block's tokens (at most BM of them)
    if (warp == 0) {
        const int t0 = row0 / grp, t1 = (min(row0 + BM, nrows) - 1) / grp;
        int lo = 0x7fffffff, hi = -1;
        for (int t = t0 + lane; t <= t1; t += 32) {
            const int p = (int)positions[t];
            lo = min(lo, p);
            hi = max(hi, p);
        }
#pragma unroll
        for (int x = 16; x > 0; x >>= 1) {
            lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, x));
            hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, x));
        }
        if (lane == 0) {
            lims[0] = lo;
            lims[1] = hi;
        }
    }

    for (int u = threadIdx.x; u < BM * (D / 8); u += NT) {  // the query rows (past nrows: the last, never written)
        const int r = u / (D / 8), c = (u % (D / 8)) * 8;
        const int row = min(row0 + r, nrows - 1);
        const T *src = q + (i64)(row / grp) * q_stride + (i64)(kvh * grp + row % grp) * D + c;
        const uint4 v = *reinterpret_cast<const uint4 *>(src);
        if constexpr (KvqSame<C, T>::value) {
            *reinterpret_cast<uint4 *>(sq + r * LD + c) = v;
        } else {  // bf16 into fp16: exact within fp16's range
            float f[8];
            unpack8<T>(v, f);
            *reinterpret_cast<uint4 *>(sq + r * LD + c) = pack8<C>(f);
        }
    }
    __syncthreads();
    const int lim_lo = lims[0], lim_hi = lims[1];
    const int ra = min(row0 + warp * 16 + g, nrows - 1), rb = min(row0 + warp * 16 + g + 8, nrows - 1);
    const int lima = (int)positions[ra / grp], limb = (int)positions[rb / grp];

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float ma = neg_inf(), mb = neg_inf(), la = 0.f, lb = 0.f;

    const KvqStage<D, BITS, BN> st(smem + (BM + 2 * BN) * LD * 2);
    kvq_stage_issue<D, BITS, BN, NT>(st, kd, ks, ko, vd, vs, vo, block_table, 0, lim_hi, bs_shift, Hk, kvh);
    for (int key0 = 0; key0 <= lim_hi; key0 += BN) {
        kvqp_wait();      // tile key0 arrived in the staging while the previous one was multiplied
        __syncthreads();  // ... for every thread, and the previous tile is consumed
        kvq_stage_dequant<D, BITS, BN, LD, NT>(sk, sv, st);
        __syncthreads();
        if (key0 + BN <= lim_hi)
            kvq_stage_issue<D, BITS, BN, NT>(st, kd, ks, ko, vd, vs, vo, block_table, key0 + BN, lim_hi, bs_shift, Hk, kvh);

        float s[BN / 8][4];
#pragma unroll
        for (int i = 0; i < BN / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            unsigned a[4];
            ldsm4<false>(a, sq + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int nn = 0; nn < BN / 16; nn++) {
                unsigned b[4];  // keys nn*16 + 0..7 / 8..15, dims kk*16 + 0..7 / 8..15
                ldsm4<false>(b, sk + (nn * 16 + (lane >> 4) * 8 + (lane & 7)) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
                mma_f16(s[2 * nn], a, b[0], b[1]);
                mma_f16(s[2 * nn + 1], a, b[2], b[3]);
            }
        }

        const bool full = key0 + BN - 1 <= lim_lo;  // every key of the tile visible to every row of the block
        float xa = ma, xb = mb;
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int key = key0 + i * 8 + 2 * t4 + e;
                float va = s[i][e], vb = s[i][2 + e];  // raw scores: the scale joins the exponent's FFMA
                if (!full) {
                    va = key <= lima ? va : neg_inf();
                    vb = key <= limb ? vb : neg_inf();
                }
                s[i][e] = va;
                s[i][2 + e] = vb;
                xa = fmaxf(xa, va);
                xb = fmaxf(xb, vb);
            }
        }
        xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 1));
        xa = fmaxf(xa, __shfl_xor_sync(0xffffffffu, xa, 2));
        xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 1));
        xb = fmaxf(xb, __shfl_xor_sync(0xffffffffu, xb, 2));
        // key 0 is visible to every row, so after the first tile both maxima are finite
        const float ca = kvqp_ex2((ma - xa) * scale_log2), cb = kvqp_ex2((mb - xb) * scale_log2);
        const bool grew = xa > ma || xb > mb;
        ma = xa;
        mb = xb;
        la *= ca;
        lb *= cb;
        if (__any_sync(0xffffffffu, grew)) {  // the output rows rescaled only where a maximum grew in the warp
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                o[i][0] *= ca;
                o[i][1] *= ca;
                o[i][2] *= cb;
                o[i][3] *= cb;
            }
        }
        const float na = -ma * scale_log2, nb = -mb * scale_log2;
#pragma unroll
        for (int i = 0; i < BN / 8; i++) {
            s[i][0] = kvqp_ex2(fmaf(s[i][0], scale_log2, na));
            s[i][1] = kvqp_ex2(fmaf(s[i][1], scale_log2, na));
            s[i][2] = kvqp_ex2(fmaf(s[i][2], scale_log2, nb));
            s[i][3] = kvqp_ex2(fmaf(s[i][3], scale_log2, nb));
            la += s[i][0] + s[i][1];
            lb += s[i][2] + s[i][3];
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            unsigned a[4];  // P's rows as the A operand: keys kk*16 + 0..7 (n-tile 2kk), 8..15 (2kk + 1)
            a[0] = pack2<C>(s[2 * kk][0], s[2 * kk][1]);
            a[1] = pack2<C>(s[2 * kk][2], s[2 * kk][3]);
            a[2] = pack2<C>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = pack2<C>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dd = 0; dd < D / 16; dd++) {
                unsigned b[4];  // keys kk*16 + 0..7 / 8..15, dims dd*16 + 0..7 / 8..15, transposed
                ldsm4<true>(b, sv + (kk * 16 + (lane & 15)) * LD + dd * 16 + (lane >> 4) * 8);
                mma_f16(o[2 * dd], a, b[0], b[1]);
                mma_f16(o[2 * dd + 1], a, b[2], b[3]);
            }
        }
    }

    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = 1.f / la, ib = 1.f / lb;
    const int wa = row0 + warp * 16 + g, wb = wa + 8;
    T *oa = out + ((i64)(wa / grp) * Hq + kvh * grp + wa % grp) * D + 2 * t4;
    T *ob = out + ((i64)(wb / grp) * Hq + kvh * grp + wb % grp) * D + 2 * t4;
#pragma unroll
    for (int i = 0; i < D / 8; i++) {
        if (wa < nrows) *reinterpret_cast<unsigned *>(oa + i * 8) = pack2<T>(o[i][0] * ia, o[i][1] * ia);
        if (wb < nrows) *reinterpret_cast<unsigned *>(ob + i * 8) = pack2<T>(o[i][2] * ib, o[i][3] * ib);
    }
#endif
}

}  // namespace ninfer

// kvq_prefill_<dtype>_d<D>_b<bits>_w<NW>: NW warps, 16 NW query rows a block. Head_dim 256: 8 warps (one block an SM,
// 239-245 registers: its 128 output floats) and 4 (two blocks; the form for sm_86 / sm_89, whose 99 KB of shared memory
// a block the 8-warp form exceeds). Head_dim 64 / 128: 16 warps (one block, at most 128 registers) and 8 (at 64 two
// blocks; at 128 one, the form of sm_86 / sm_89 / sm_120). No spills (ptxas 13.0, sm_90). Turing's build (sm_75): the forms that fit its 64 KB, 16 / 8 warps at head_dim 64, 8 at
// 128, 4 at 256, no spills (ptxas 13.0); the others compile for newer GPUs' tests (head_dim 128 at 16 warps spills).
// Blocks an SM the register budget plans for: Turing holds one block at head_dim 128 and 256 (its shared memory);
// at head_dim 128 the 8-warp form is the one sm_86 / sm_89 / sm_120 take (the 16-warp form's 120 KB exceed their 99 KB
// a block), and their 100-128 KB an SM hold one such block (86 KB), so no register cap from a second (at 128 registers
// it spilled 16 bytes on sm_120).
#define KVQP_MIN_BLOCKS(D, NW) \
    (NINFER_KVQP_TURING ? (D == 64 ? 16 / NW : 1) : D == 256 ? 8 / NW : D == 128 ? 1 : 16 / NW)
#define NINFER_KVQ_PREFILL1(S, T, D, BITS, NW)                                                          \
    extern "C" __global__ void __launch_bounds__(NW * 32, KVQP_MIN_BLOCKS(D, NW))                      \
        kvq_prefill_##S##_d##D##_b##BITS##_w##NW(                                                       \
            const T *q, const unsigned char *kd, const __half *ks, const __half *ko, const unsigned char *vd, \
            const __half *vs, const __half *vo, const int *bt, const long long *pos, T *out, int ntok, int Hq, \
            int Hk, int bs_shift, int q_stride, float scale_log2) {                                     \
        extern __shared__ __align__(16) unsigned char kvqp_smem[];                                      \
        ninfer::pdl_enter();                                                                           \
        ninfer::kvq_prefill<T, D, BITS, NW>(kvqp_smem, q, kd, ks, ko, vd, vs, vo, bt, pos, out, ntok, Hq, Hk,      \
                                            bs_shift, q_stride, scale_log2);                            \
    }

#define NINFER_KVQ_PREFILL_KERNELS(S, T)                                                                \
    NINFER_KVQ_PREFILL1(S, T, 64, 8, 16) NINFER_KVQ_PREFILL1(S, T, 64, 4, 16)                           \
    NINFER_KVQ_PREFILL1(S, T, 64, 8, 8) NINFER_KVQ_PREFILL1(S, T, 64, 4, 8)                             \
    NINFER_KVQ_PREFILL1(S, T, 128, 8, 16) NINFER_KVQ_PREFILL1(S, T, 128, 4, 16)                         \
    NINFER_KVQ_PREFILL1(S, T, 128, 8, 8) NINFER_KVQ_PREFILL1(S, T, 128, 4, 8)                           \
    NINFER_KVQ_PREFILL1(S, T, 256, 8, 8) NINFER_KVQ_PREFILL1(S, T, 256, 4, 8)                           \
    NINFER_KVQ_PREFILL1(S, T, 256, 8, 4) NINFER_KVQ_PREFILL1(S, T, 256, 4, 4)
