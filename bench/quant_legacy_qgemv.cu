// Grouped-int GEMV for decode (1 token) and verify (up to 16 tokens), dequantisation fused:
//   y[t, n] = sum_k x[t, k] * (u[n, k] * s[n, g] + o[n, g]) (+ b[n]),  g = k / G
// u: unsigned codes packed as ninfer.quant.layout.QuantWeight (int8: one per byte; int4: two per byte,
// even k in the low nibble); s, o: float32 [N, K/G] (the launcher folds zero points and GGUF mins into o).
// Per 16-byte weight vector (16 int8 or 32 int4 codes, inside one group since G % that == 0) each lane
// forms dot = sum u*x and sx = sum x, then acc += s*dot + o*sx: one scale/offset load per vector.
// One warp per output row, QG_WARPS rows per block; NT tokens share each weight load.
#include "ninfer/common.cuh"

#ifndef QG_WARPS
#define QG_WARPS 4
#endif

namespace ninfer {

template <typename T>
__device__ __forceinline__ void load_x(const T *__restrict__ xr, int k0, int n, float *xf) {
    // n (16 or 32) consecutive activations starting at k0 (k0 % 8 == 0): 16-byte loads
    const uint4 *p = reinterpret_cast<const uint4 *>(xr + k0);
#pragma unroll
    for (int j = 0; j < n / 8; j++) unpack8<T>(__ldg(p + j), xf + 8 * j);
}

template <typename T, int BITS, int NT>
__device__ __forceinline__ void qgemv(const unsigned char *__restrict__ Wq, const float *__restrict__ S,
                                      const float *__restrict__ O, const T *__restrict__ x,
                                      const T *__restrict__ bias, T *__restrict__ y, int N, int K, int G,
                                      int ntok) {
    constexpr int PER = 128 / BITS;  // codes per 16-byte vector: 16 (int8) or 32 (int4)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = blockIdx.x * QG_WARPS + warp;
    const int t0 = blockIdx.y * NT;
    if (n >= N) return;
    const int nt = min(NT, ntok - t0);
    const int KV = K / PER;  // vectors per row
    const int ng = K / G;
    const uint4 *Wr = reinterpret_cast<const uint4 *>(Wq + (i64)n * (K * BITS / 8));
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.f;
    for (int v = lane; v < KV; v += 32) {
        const uint4 w = load_stream(Wr + v);
        const int k0 = v * PER;
        const float s = __ldg(S + (i64)n * ng + k0 / G), o = __ldg(O + (i64)n * ng + k0 / G);
        float u[PER];
        const unsigned int words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 32 / BITS; j++)
                u[i * (32 / BITS) + j] = (float)((words[i] >> (BITS * j)) & ((1u << BITS) - 1));
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t < nt) {
                float xf[PER];
                load_x<T>(x + (i64)(t0 + t) * K, k0, PER, xf);
                float dot = 0.f, sx = 0.f;
#pragma unroll
                for (int i = 0; i < PER; i++) {
                    dot = fmaf(u[i], xf[i], dot);
                    sx += xf[i];
                }
                acc[t] = fmaf(s, dot, fmaf(o, sx, acc[t]));
            }
        }
    }
    const float b = bias ? to_f(bias[n]) : 0.f;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float r = warp_sum(acc[t]);
        if (lane == 0 && t < nt) y[(i64)(t0 + t) * N + n] = from_f<T>(r + b);
    }
}

}  // namespace ninfer

#define QG_KERNEL(S, T, B, NT)                                                                          \
    extern "C" __global__ void __launch_bounds__(QG_WARPS * 32) qgemv_##S##_b##B##_t##NT(              \
        const unsigned char *Wq, const float *Sc, const float *O, const T *x, const T *b, T *y, int N,  \
        int K, int G, int ntok) {                                                                       \
        ninfer::qgemv<T, B, NT>(Wq, Sc, O, x, b, y, N, K, G, ntok);                                     \
    }

#define QG_WIDTHS(S, T, B) QG_KERNEL(S, T, B, 1) QG_KERNEL(S, T, B, 2) QG_KERNEL(S, T, B, 4) \
    QG_KERNEL(S, T, B, 8) QG_KERNEL(S, T, B, 16)

#if !defined(QM_BENCH_ONLY)
QG_WIDTHS(f16, __half, 8)
QG_WIDTHS(f16, __half, 4)
#ifndef QG_NO_BF16  // sm_75 backends serve fp16 only
QG_WIDTHS(bf16, __nv_bfloat16, 8)
QG_WIDTHS(bf16, __nv_bfloat16, 4)
#endif
#endif

// ---------------------------------------------------------------------------------------------------------
// Tensor-core GEMV/GEMM for decode and verify (sm_80+): weights repacked at load into 16-row tiles
// (ninfer.quant.layout.pack_tiles), one 16-byte load per lane holds the A fragments of 4 (int4) or 2 (int8)
// mma.m16n8k16 steps. Codes become exact small integers (u - z) in fp16/bf16 with bit tricks (int4: lop3
// with the 0x6400 / 0x4300 exponent, no int->float conversion; int8: prmt), the MMA multiplies them by up
// to 8 tokens' activations (B fragment, column = token) into float32, and each group's partial sum is
// scaled by its float scale in float32 (no half-precision accumulation anywhere). A block owns one tile
// of 16 rows; its warps split K (chunks interleaved) with QM_U loads in flight per lane, and meet in
// shared memory in a fixed order (deterministic). Needs group % 32 == 0, K % 64 (int4) / 32 (int8) == 0,
// 16-bit scales and an integer zero point (or none); everything else takes the kernel above.
#if defined(QG_MMA)
#ifndef QM_U
#define QM_U 4  // 16-byte weight loads in flight per lane
#endif
#define QM_MAX_WARPS 16

namespace ninfer {

__device__ __forceinline__ uint4 qm_load(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ unsigned f16x2_sub(unsigned a, unsigned b) {
    unsigned d;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

__device__ __forceinline__ unsigned f16x2_fma(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ unsigned bf16x2_fma(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ void qm_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                                       const __half *) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void qm_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                                       const __nv_bfloat16 *) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A fragment registers of one mma step: a[0], a[2] hold row g (two k each), a[1], a[3] row g + 8.
// zz = z_g | z_{g+8} << 8, the zero points of the two rows in this group.
template <typename T, int BITS> struct QmDeq;

template <> struct QmDeq<__half, 4> {  // word nibbles (n0..n7) = rows (g, g+8, g, g+8, g, g+8, g, g+8)
    unsigned zg, mg8;                  // half2 1024 + z_g; half2 -(64 + z_{g+8})
    __device__ __forceinline__ void init(unsigned zz) {
        zg = (0x6400u | (zz & 0xFFu)) * 0x10001u;
        mg8 = (unsigned)__half_as_ushort(__float2half_rn(-64.f - (float)(zz >> 8))) * 0x10001u;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0], x8 = x >> 8;
        a[0] = f16x2_sub((x & 0x000F000Fu) | 0x64006400u, zg);  // 1024 + n - (1024 + z)
        a[1] = f16x2_fma((x & 0x00F000F0u) | 0x64006400u, 0x2C002C00u, mg8);  // (1024 + 16n) / 16 - (64 + z)
        a[2] = f16x2_sub((x8 & 0x000F000Fu) | 0x64006400u, zg);
        a[3] = f16x2_fma((x8 & 0x00F000F0u) | 0x64006400u, 0x2C002C00u, mg8);
    }
};

template <> struct QmDeq<__nv_bfloat16, 4> {  // bf16 has 7 mantissa bits: every nibble is moved to bit 0
    unsigned ng, ng8;                          // bf16x2 -(128 + z)
    __device__ __forceinline__ void init(unsigned zz) {
        ng = (0xC300u | (zz & 0xFFu)) * 0x10001u;
        ng8 = (0xC300u | (zz >> 8)) * 0x10001u;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0];
        a[0] = bf16x2_fma((x & 0x000F000Fu) | 0x43004300u, 0x3F803F80u, ng);  // (128 + n) * 1 - (128 + z)
        a[1] = bf16x2_fma(((x >> 4) & 0x000F000Fu) | 0x43004300u, 0x3F803F80u, ng8);
        a[2] = bf16x2_fma(((x >> 8) & 0x000F000Fu) | 0x43004300u, 0x3F803F80u, ng);
        a[3] = bf16x2_fma(((x >> 12) & 0x000F000Fu) | 0x43004300u, 0x3F803F80u, ng8);
    }
};

template <> struct QmDeq<__half, 8> {  // word bytes = (g, k), (g, k+1), (g+8, k), (g+8, k+1)
    unsigned zg, zg8;                  // half2 1024 + z
    __device__ __forceinline__ void init(unsigned zz) {
        zg = (0x6400u | (zz & 0xFFu)) * 0x10001u;
        zg8 = (0x6400u | (zz >> 8)) * 0x10001u;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        a[0] = f16x2_sub(__byte_perm(w[0], 0x64646464u, 0x4140), zg);
        a[1] = f16x2_sub(__byte_perm(w[0], 0x64646464u, 0x4342), zg8);
        a[2] = f16x2_sub(__byte_perm(w[1], 0x64646464u, 0x4140), zg);
        a[3] = f16x2_sub(__byte_perm(w[1], 0x64646464u, 0x4342), zg8);
    }
};

template <> struct QmDeq<__nv_bfloat16, 8> {  // through float32 2^23 + u, exact, then the top halves
    float fg, fg8;                             // 2^23 + z
    __device__ __forceinline__ void init(unsigned zz) {
        fg = 8388608.f + (float)(zz & 0xFFu);
        fg8 = 8388608.f + (float)(zz >> 8);
    }
    __device__ __forceinline__ unsigned pair(unsigned w, float f, int lo) const {
        const float a = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 | lo)) - f;
        const float b = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 | (lo + 1))) - f;
        return __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x7632);
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        a[0] = pair(w[0], fg, 0);
        a[1] = pair(w[0], fg8, 2);
        a[2] = pair(w[1], fg, 0);
        a[3] = pair(w[1], fg8, 2);
    }
};

__device__ __forceinline__ float qm_scale(unsigned v, const __half *) { return __half2float(__ushort_as_half(v)); }
__device__ __forceinline__ float qm_scale(unsigned v, const __nv_bfloat16 *) { return __uint_as_float(v << 16); }

// Wp: tiles x (K / CHUNK) x 32 lanes of uint4; Sp: tiles x groups x 8 of (s_g | s_{g+8} << 16);
// Zp: tiles x groups x 8 of (z_g | z_{g+8} << 8) (ZP only). NSET token sets of 8 (NT = 8 or 16).
template <typename T, typename ST, int BITS, bool ZP, int NSET>
__device__ __forceinline__ void qmma(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                     const unsigned short *__restrict__ Zp, const T *__restrict__ x,
                                     const T *__restrict__ bias, T *__restrict__ y, int N, int K, int G,
                                     int ntok) {
    constexpr int CHUNK = BITS == 4 ? 64 : 32;  // k per lane's 16-byte load
    constexpr int HALVES = CHUNK / 32;         // a half: 32 k, two mma steps, one scale flush at most
    constexpr unsigned ZSYM = BITS == 4 ? 0x0808u : 0x8080u;
    __shared__ float red[QM_MAX_WARPS][NSET * 4][32];
    const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x;
    const int nchunk = K / CHUNK, ng = K / G;
    const bool merge = (G % CHUNK) == 0;  // both halves of a chunk in one group: one flush per chunk
    const uint4 *Wt = Wp + (i64)tile * nchunk * 32 + lane;
    const unsigned *St = Sp + (i64)tile * ng * 8 + g;
    const unsigned short *Zt = Zp + (i64)tile * ng * 8 + g;
    const uint4 *xr[NSET];
#pragma unroll
    for (int s = 0; s < NSET; s++)  // the B column of this lane is token g (+ 8); past ntok it repeats the last
        xr[s] = reinterpret_cast<const uint4 *>(x + (i64)min(g + 8 * s, ntok - 1) * K + 8 * t);
    float acc[NSET][4];
#pragma unroll
    for (int s = 0; s < NSET; s++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[s][i] = 0.f;
    const int stride = warps;
    uint4 wv[QM_U];
#if defined(QM_PIPE)
    // Variant (not yet measured on a GPU): the group index by shift (G a power of two, the launcher checks) and
    // each chunk's scales / zero points fetched with its weights, QM_U chunks ahead, off the critical path.
    const int gsh = __ffs(G) - 1;
    unsigned sv[QM_U][HALVES], zv[QM_U][HALVES];
#define QM_FETCH(u, c)                                                          \
    {                                                                           \
        wv[u] = qm_load(Wt + (i64)(c) * 32);                                    \
        _Pragma("unroll") for (int h_ = 0; h_ < HALVES; h_++) {                 \
            const int g_ = ((c) * CHUNK + 32 * h_) >> gsh;                       \
            sv[u][h_] = __ldg(St + g_ * 8);                                     \
            zv[u][h_] = ZP ? (unsigned)__ldg(Zt + g_ * 8) : ZSYM;               \
        }                                                                       \
    }
#else
#define QM_FETCH(u, c) wv[u] = qm_load(Wt + (i64)(c) * 32);
#endif
#pragma unroll
    for (int u = 0; u < QM_U; u++)
        if (warp + u * stride < nchunk) QM_FETCH(u, warp + u * stride)
    for (int c0 = warp; c0 < nchunk; c0 += QM_U * stride) {
#pragma unroll
        for (int u = 0; u < QM_U; u++) {
            const int c = c0 + u * stride;
            if (c < nchunk) {
                const uint4 cur = wv[u];
#if defined(QM_PIPE)
                unsigned cs[HALVES], cz[HALVES];
#pragma unroll
                for (int h = 0; h < HALVES; h++) cs[h] = sv[u][h], cz[h] = zv[u][h];
#endif
                if (c + QM_U * stride < nchunk) QM_FETCH(u, c + QM_U * stride)
                const unsigned words[4] = {cur.x, cur.y, cur.z, cur.w};
                float tmp[NSET][4];
#pragma unroll
                for (int s = 0; s < NSET; s++)
#pragma unroll
                    for (int i = 0; i < 4; i++) tmp[s][i] = 0.f;
#pragma unroll
                for (int h = 0; h < HALVES; h++) {
                    const int k = c * CHUNK + 32 * h;
#if !defined(QM_PIPE)
                    const int gi = k / G;
#endif
                    uint4 xv[NSET];
#pragma unroll
                    for (int s = 0; s < NSET; s++) xv[s] = __ldg(xr[s] + k / 8);
                    QmDeq<T, BITS> dq;
#if defined(QM_PIPE)
                    dq.init(cz[h]);
#else
                    dq.init(ZP ? (unsigned)__ldg(Zt + gi * 8) : ZSYM);
#endif
#pragma unroll
                    for (int s2 = 0; s2 < 2; s2++) {
                        unsigned a[4];
                        dq.step(words + (BITS == 4 ? 2 * h + s2 : 2 * s2), a);
                        const unsigned xw[4] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w};
                        qm_mma(tmp[0], a, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                        if (NSET > 1) {
                            const unsigned xw1[4] = {xv[NSET - 1].x, xv[NSET - 1].y, xv[NSET - 1].z,
                                                     xv[NSET - 1].w};
                            qm_mma(tmp[NSET - 1], a, xw1[2 * s2], xw1[2 * s2 + 1], (const T *)nullptr);
                        }
                    }
                    if (h == HALVES - 1 || !merge) {
#if defined(QM_PIPE)
                        const unsigned sp = cs[h];
#else
                        const unsigned sp = __ldg(St + gi * 8);
#endif
                        const float s0 = qm_scale(sp & 0xFFFFu, (const ST *)nullptr);
                        const float s1 = qm_scale(sp >> 16, (const ST *)nullptr);
#pragma unroll
                        for (int s = 0; s < NSET; s++) {
                            acc[s][0] = fmaf(s0, tmp[s][0], acc[s][0]);
                            acc[s][1] = fmaf(s0, tmp[s][1], acc[s][1]);
                            acc[s][2] = fmaf(s1, tmp[s][2], acc[s][2]);
                            acc[s][3] = fmaf(s1, tmp[s][3], acc[s][3]);
#pragma unroll
                            for (int i = 0; i < 4; i++) tmp[s][i] = 0.f;
                        }
                    }
                }
            }
        }
    }
#undef QM_FETCH
    if (warps > 1) {
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) red[warp][s * 4 + i][lane] = acc[s][i];
        __syncthreads();
        if (warp != 0) return;
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float v = red[0][s * 4 + i][lane];
                for (int w = 1; w < warps; w++) v += red[w][s * 4 + i][lane];
                acc[s][i] = v;
            }
    }
    // lane (g, t) holds rows g, g + 8 of the tile for tokens 2t, 2t + 1 (+ 8 in the second set)
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int n = tile * 16 + g + 8 * r;
        if (n >= N) continue;
        const float b = bias ? to_f(bias[n]) : 0.f;
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int tok = 8 * s + 2 * t + j;
                if (tok < ntok) y[(i64)tok * N + n] = from_f<T>(acc[s][2 * r + j] + b);
            }
    }
}

}  // namespace ninfer

#define QM_KERNEL(S, T, SS, ST, B, Z, ZN, NSET, NT)                                                        \
    extern "C" __global__ void __launch_bounds__(QM_MAX_WARPS * 32) qmma_##S##_s##SS##_b##B##_##ZN##_t##NT( \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G, int ntok) {                                                                           \
        ninfer::qmma<T, ST, B, Z, NSET>(Wp, Sp, Zp, x, b, y, N, K, G, ntok);                               \
    }

#define QM_WIDTHS(S, T, SS, ST, B, Z, ZN) QM_KERNEL(S, T, SS, ST, B, Z, ZN, 1, 8) QM_KERNEL(S, T, SS, ST, B, Z, ZN, 2, 16)
#define QM_ZP(S, T, SS, ST, B) QM_WIDTHS(S, T, SS, ST, B, false, sym) QM_WIDTHS(S, T, SS, ST, B, true, zp)
#define QM_SCALES(S, T, B) QM_ZP(S, T, f16, __half, B) QM_ZP(S, T, bf16, __nv_bfloat16, B)

#if defined(QM_BENCH_ONLY)  // bench/quant.py's variants (other QM_U): bf16 activations, fp16 scales, symmetric
QM_WIDTHS(bf16, __nv_bfloat16, f16, __half, 4, false, sym)
QM_WIDTHS(bf16, __nv_bfloat16, f16, __half, 8, false, sym)
#else
QM_SCALES(f16, __half, 4)
QM_SCALES(f16, __half, 8)
QM_SCALES(bf16, __nv_bfloat16, 4)
QM_SCALES(bf16, __nv_bfloat16, 8)
#endif
#endif  // QG_MMA
