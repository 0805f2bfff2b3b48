// The chunked prefill's state pass on tensor cores (sm_80+, 16-bit q/k): the algebra of gdn_chunk_state
// (gdn_chunked.cuh), the same scratch from gdn_chunk_prep, with each chunk's products as mma.sync m16n8k8 TF32 with
// fp32 accumulation. Every fp32 operand is split into two TF32 parts (x = hi + lo, "3xTF32": hi*hi + hi*lo + lo*hi),
// which keeps fp32 accuracy (the state is compared with the reference at 1e-5); q and k (fp16/bf16) are exact in
// TF32, so their products take two mma's, not three.
//
// Grid: Dv / 32 value slices x value heads, 4 warps (2 blocks per SM). Per chunk of 64 tokens:
//   P = W S, R = Q S             warp w: tokens 16w..16w+15 x the slice's 32 columns (old S from shared memory)
//   v_new = U - P                to shared memory (zero past the prompt)
//   S <- e^(G_63) S + K^T (diag(e^(G_63 - G) rk) v_new)   warp w: state rows 32w..32w+31, held in registers
//   o = diag(e^G rq) R + Aqk v_new                          (Aqk is zero right of the diagonal: warp w stops at 16w+15)
// The next chunk's W, q and k stream into shared memory by cp.async while this one computes (W and q once the
// chunk's first products have read them, k once the state update has).
#pragma once
#include "gdn_chunked.cuh"

namespace ninfer {

constexpr int GDN_MMA_BV = 32;        // value columns per block
constexpr int GDN_MMA_THREADS = 128;  // 4 warps
constexpr int GDN_MMA_LDW = 132;      // floats per W row in shared memory (conflict-free A fragments)
constexpr int GDN_MMA_LDH = 136;      // 16-bit elements per q / k row (rows 16-byte aligned, conflict-free)
constexpr int GDN_MMA_LDS = 40;       // floats per row of the state and v_new tiles

// Dynamic shared memory of gdn_chunk_state_mma (ninfer.kernels.gdn.MMA_SMEM is the same): W [C][LDW] fp32,
// q and k [C][LDH] 16-bit, the state [Dk][LDS] and v_new [C][LDS] fp32, the gates [2][C] twice and [2].
__host__ __device__ constexpr int gdn_mma_smem_bytes() {
    return GDN_CHUNK * GDN_MMA_LDW * 4 + 2 * GDN_CHUNK * GDN_MMA_LDH * 2 + (128 + GDN_CHUNK) * GDN_MMA_LDS * 4
           + (4 * GDN_CHUNK + 2) * 4;
}

// The device instructions (tests/test_gdn_kernels_host.py runs this source on the CPU with NINFER_GDN_MMA_HOST
// defined and its own emulation of them: one warp's mma through a per-warp exchange, cp.async as a copy).
#ifndef NINFER_GDN_MMA_HOST
#define NINFER_GDN_MMA_ON (__CUDA_ARCH__ >= 800)
__device__ __forceinline__ unsigned tf32_rna(float x) {
#if __CUDA_ARCH__ >= 800
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#else
    return __float_as_uint(x);
#endif
}

// x = hi + lo, both TF32 (lo holds the 13 bits hi drops, rounded)
__device__ __forceinline__ void tf32_split(float x, unsigned &hi, unsigned &lo) {
    hi = tf32_rna(x);
    lo = tf32_rna(x - __uint_as_float(hi));
}

// d += A (16x8) B (8x8): A rows g / g+8 at k = t4 in a0 / a1, at k = t4+4 in a2 / a3; B column g at k = t4 in b0,
// k = t4+4 in b1; d rows g (d0, d1) / g+8 (d2, d3) at columns 2 t4, 2 t4 + 1 (g = lane / 4, t4 = lane % 4).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// 16 bytes (sz = 16) or zeros (sz = 0) into shared memory, past L1
__device__ __forceinline__ void gdn_cp16(void *dst, const void *src, int sz) {
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(sz) : "memory");
#endif
}

__device__ __forceinline__ void gdn_cp_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

__device__ __forceinline__ void gdn_cp_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

#else
#define NINFER_GDN_MMA_ON 1
#endif

template <typename T>
__device__ __forceinline__ unsigned f16_tf32(T x) {  // fp16/bf16 values are exact in TF32
    return __float_as_uint(to_f(x));
}

template <typename T>
__device__ __forceinline__ void gdn_chunk_state_mma(unsigned char *smem, const T *__restrict__ q,
                                                    const T *__restrict__ k, const float *__restrict__ W,
                                                    const float *__restrict__ U, const float *__restrict__ Aqk,
                                                    const float *__restrict__ Gc, const float *__restrict__ rq,
                                                    const float *__restrict__ rk, const float *state_in,
                                                    T *__restrict__ out, float *state_out, int ntok, int H, int Hk,
                                                    int q_stride, int k_stride, int NC) {
#if NINFER_GDN_MMA_ON
    static_assert(sizeof(T) == 2, "16-bit q and k");
    constexpr int C = GDN_CHUNK, D = 128, BV = GDN_MMA_BV, NT = GDN_MMA_THREADS, NTL = BV / 8;
    constexpr int LDW = GDN_MMA_LDW, LDH = GDN_MMA_LDH, LDS = GDN_MMA_LDS;
    static_assert(NT == 4 * 32 && C == 4 * 16 && D == 4 * 32, "gdn_chunk_state_mma shape");
    float *Ws = reinterpret_cast<float *>(smem);         // [C][LDW] this chunk's W rows
    T *Qs = reinterpret_cast<T *>(Ws + C * LDW);          // [C][LDH] raw q rows (zero past the prompt)
    T *Ks = Qs + C * LDH;                                 // [C][LDH] raw k rows (zero past the prompt)
    float *Ss = reinterpret_cast<float *>(Ks + C * LDH);  // [D][LDS] the state slice S[:, v0:v0+BV]
    float *Vn = Ss + D * LDS;                             // [C][LDS] v_new
    float *fqs = Vn + C * LDS;                            // [2][C] by chunk parity: rq e^G
    float *fks = fqs + 2 * C;                             // [2][C] rk e^(G_63 - G), zero past the prompt
    float *decs = fks + 2 * C;                            // [2] e^(G_63)

    const int tid = threadIdx.x, lane = tid % 32, w = tid / 32, g = lane / 4, t4 = lane % 4;
    const int h = blockIdx.y, hk = h / (H / Hk), v0 = blockIdx.x * BV, Tp = NC * C;
    const int m0 = 16 * w;  // this warp's tokens in P, R and o
    const int r0 = 32 * w;  // this warp's state rows

    auto load_w = [&](int c) {  // W rows of chunk c (zero past the prompt, as gdn_chunk_prep wrote them)
        const float *src = W + ((i64)h * Tp + (i64)c * C) * D;
        for (int e = tid; e < C * D / 4; e += NT) {
            const int row = e / (D / 4), col = (e % (D / 4)) * 4;
            gdn_cp16(Ws + row * LDW + col, src + (i64)row * D + col, 16);
        }
    };
    auto load_rows = [&](const T *x, int stride, T *dst, int c) {  // q or k rows of chunk c, zeros past the prompt
        constexpr int V = 16 / sizeof(T);
        const int t0 = c * C;
        for (int e = tid; e < C * D / V; e += NT) {
            const int row = e / (D / V), col = (e % (D / V)) * V;
            const bool ok = t0 + row < ntok;
            gdn_cp16(dst + row * LDH + col, ok ? x + (i64)(t0 + row) * stride + (i64)hk * D + col : x, ok ? 16 : 0);
        }
    };
    auto gates = [&](int c, float &fq, float &fk, float &dec) {  // thread tid < C: token tid of chunk c
        const float *Gh = Gc + (i64)h * Tp + (i64)c * C;
        const float G = Gh[tid], G63 = Gh[C - 1];
        fq = rq[(i64)hk * Tp + c * C + tid] * expf(G);
        fk = c * C + tid < ntok ? rk[(i64)hk * Tp + c * C + tid] * expf(G63 - G) : 0.f;
        dec = expf(G63);
    };

    if (tid < C) {
        float fq, fk, dec;
        gates(0, fq, fk, dec);
        fqs[tid] = fq, fks[tid] = fk;
        if (tid == 0) decs[0] = dec;
    }
    load_w(0);
    load_rows(q, q_stride, Qs, 0);
    load_rows(k, k_stride, Ks, 0);
    gdn_cp_commit();

    float sacc[2][NTL][4];  // state rows r0 + 16 mt + g (+8), columns 8 nt + 2 t4 (+1) of the slice
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int row = r0 + 16 * mt + g + 8 * hf, col = 8 * nt + 2 * t4;
                float2 f = make_float2(0.f, 0.f);
                if (state_in != nullptr) f = *reinterpret_cast<const float2 *>(state_in + ((i64)h * D + row) * D + v0 + col);
                sacc[mt][nt][2 * hf] = f.x, sacc[mt][nt][2 * hf + 1] = f.y;
                *reinterpret_cast<float2 *>(Ss + row * LDS + col) = f;
            }

    for (int c = 0; c < NC; c++) {
        const int t0 = c * C, n = min(C, ntok - t0), par = c & 1;
        float nfq = 0.f, nfk = 0.f, ndec = 0.f;  // the next chunk's gates, stored after this chunk's k is read
        if (tid < C && c + 1 < NC) gates(c + 1, nfq, nfk, ndec);
        float u[NTL][4];  // U at this warp's v_new fragment positions
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const float2 f = *reinterpret_cast<const float2 *>(
                    U + ((i64)h * Tp + t0 + m0 + g + 8 * hf) * D + v0 + 8 * nt + 2 * t4);
                u[nt][2 * hf] = f.x, u[nt][2 * hf + 1] = f.y;
            }
        gdn_cp_wait_all();
        __syncthreads();  // W, q, k, the state and the gates of chunk c are in

        // P = W S and R = Q S over the 128 key rows
        float p[NTL][4], rr[NTL][4];
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) p[nt][i] = 0.f, rr[nt][i] = 0.f;
#pragma unroll 2
        for (int kk = 0; kk < D / 8; kk++) {
            const float *wr = Ws + (m0 + g) * LDW + 8 * kk + t4;
            unsigned wh[4], wl[4], qa[4];
            tf32_split(wr[0], wh[0], wl[0]);
            tf32_split(wr[8 * LDW], wh[1], wl[1]);
            tf32_split(wr[4], wh[2], wl[2]);
            tf32_split(wr[8 * LDW + 4], wh[3], wl[3]);
            const T *qr = Qs + (m0 + g) * LDH + 8 * kk + t4;
            qa[0] = f16_tf32(qr[0]), qa[1] = f16_tf32(qr[8 * LDH]);
            qa[2] = f16_tf32(qr[4]), qa[3] = f16_tf32(qr[8 * LDH + 4]);
#pragma unroll
            for (int nt = 0; nt < NTL; nt++) {
                const float *sr = Ss + (8 * kk + t4) * LDS + 8 * nt + g;
                unsigned sh0, sl0, sh1, sl1;
                tf32_split(sr[0], sh0, sl0);
                tf32_split(sr[4 * LDS], sh1, sl1);
                mma_tf32(p[nt], wl, sh0, sh1);
                mma_tf32(p[nt], wh, sl0, sl1);
                mma_tf32(p[nt], wh, sh0, sh1);
                mma_tf32(rr[nt], qa, sl0, sl1);
                mma_tf32(rr[nt], qa, sh0, sh1);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int row = m0 + g + 8 * hf;
                const bool ok = row < n;
                *reinterpret_cast<float2 *>(Vn + row * LDS + 8 * nt + 2 * t4) =
                    make_float2(ok ? u[nt][2 * hf] - p[nt][2 * hf] : 0.f, ok ? u[nt][2 * hf + 1] - p[nt][2 * hf + 1] : 0.f);
            }
        const float fq_lo = fqs[par * C + m0 + g], fq_hi = fqs[par * C + m0 + g + 8];
        float aq[C / 8][4];  // A fragments of Aqk rows m0.., columns 8 kk..: kk <= 2w+1 (the rest is zero)
        const float *Ar = Aqk + ((i64)h * NC + c) * C * C + (m0 + g) * C + t4;
#pragma unroll
        for (int kk = 0; kk < C / 8; kk++) {
            const bool need = kk <= 2 * w + 1;
            aq[kk][0] = need ? Ar[8 * kk] : 0.f;
            aq[kk][1] = need ? Ar[8 * C + 8 * kk] : 0.f;
            aq[kk][2] = need ? Ar[8 * kk + 4] : 0.f;
            aq[kk][3] = need ? Ar[8 * C + 8 * kk + 4] : 0.f;
        }
        __syncthreads();  // v_new is in; W, q and the old state are read
        if (c + 1 < NC) {
            load_w(c + 1);
            load_rows(q, q_stride, Qs, c + 1);
        }
        gdn_cp_commit();

        // S <- e^(G_63) S + K^T (fk v_new): A[m][t] = k_t[m] (raw), B[t][v] = fk_t v_new[t][v]
        const float dec = decs[par];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) sacc[mt][nt][i] *= dec;
#pragma unroll 2
        for (int kk = 0; kk < C / 8; kk++) {
            const int ta = 8 * kk + t4;
            const float f0 = fks[par * C + ta], f1 = fks[par * C + ta + 4];
            unsigned vh[NTL][2], vl[NTL][2];
#pragma unroll
            for (int nt = 0; nt < NTL; nt++) {
                tf32_split(f0 * Vn[ta * LDS + 8 * nt + g], vh[nt][0], vl[nt][0]);
                tf32_split(f1 * Vn[(ta + 4) * LDS + 8 * nt + g], vh[nt][1], vl[nt][1]);
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                const T *kr = Ks + ta * LDH + r0 + 16 * mt + g;
                const unsigned ka[4] = {f16_tf32(kr[0]), f16_tf32(kr[8]), f16_tf32(kr[4 * LDH]),
                                        f16_tf32(kr[4 * LDH + 8])};
#pragma unroll
                for (int nt = 0; nt < NTL; nt++) {
                    mma_tf32(sacc[mt][nt], ka, vl[nt][0], vl[nt][1]);
                    mma_tf32(sacc[mt][nt], ka, vh[nt][0], vh[nt][1]);
                }
            }
        }
        // the new state to shared memory (its rows are this warp's; the old state was read before the sync)
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++)
                    *reinterpret_cast<float2 *>(Ss + (r0 + 16 * mt + g + 8 * hf) * LDS + 8 * nt + 2 * t4) =
                        make_float2(sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
        __syncthreads();  // k and this chunk's gates are read
        if (c + 1 < NC) load_rows(k, k_stride, Ks, c + 1);
        gdn_cp_commit();
        if (tid < C && c + 1 < NC) {
            fqs[(par ^ 1) * C + tid] = nfq, fks[(par ^ 1) * C + tid] = nfk;
            if (tid == 0) decs[par ^ 1] = ndec;
        }

        // o = e^G rq (Q S) + Aqk v_new, rows m0 + g (+8)
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
            rr[nt][0] *= fq_lo, rr[nt][1] *= fq_lo, rr[nt][2] *= fq_hi, rr[nt][3] *= fq_hi;
#pragma unroll
        for (int kk = 0; kk < C / 8; kk++) {
            if (kk <= 2 * w + 1) {  // warp-uniform
                unsigned ah[4], al[4];
#pragma unroll
                for (int i = 0; i < 4; i++) tf32_split(aq[kk][i], ah[i], al[i]);
#pragma unroll
                for (int nt = 0; nt < NTL; nt++) {
                    unsigned bh0, bl0, bh1, bl1;
                    tf32_split(Vn[(8 * kk + t4) * LDS + 8 * nt + g], bh0, bl0);
                    tf32_split(Vn[(8 * kk + t4 + 4) * LDS + 8 * nt + g], bh1, bl1);
                    mma_tf32(rr[nt], al, bh0, bh1);
                    mma_tf32(rr[nt], ah, bl0, bl1);
                    mma_tf32(rr[nt], ah, bh0, bh1);
                }
            }
        }
#pragma unroll
        for (int nt = 0; nt < NTL; nt++)
#pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int row = m0 + g + 8 * hf;
                if (row < n) {
                    T *o = out + ((i64)(t0 + row) * H + h) * D + v0 + 8 * nt + 2 * t4;
                    o[0] = from_f<T>(rr[nt][2 * hf]);
                    o[1] = from_f<T>(rr[nt][2 * hf + 1]);
                }
            }
    }
    gdn_cp_wait_all();
    if (state_out != nullptr) {
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++)
                    *reinterpret_cast<float2 *>(state_out + ((i64)h * D + r0 + 16 * mt + g + 8 * hf) * D + v0 + 8 * nt +
                                                2 * t4) = make_float2(sacc[mt][nt][2 * hf], sacc[mt][nt][2 * hf + 1]);
    }
#endif
}

}  // namespace ninfer
