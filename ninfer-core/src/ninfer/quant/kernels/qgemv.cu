// Grouped-int GEMV for decode (1 token) and verify (up to 16 tokens), dequantisation fused:
//   y[t, n] = sum_k x[t, k] * (u[n, k] * s[n, g] + o[n, g]) (+ b[n]),  g = k / G
// u: unsigned codes packed as ninfer.quant.layout.QuantWeight (int8: one per byte; int4: two per byte,
// even k in the low nibble); s, o: float32 [N, K/G] (the launcher folds zero points and GGUF mins into o).
// Per 16-byte weight vector (16 int8 or 32 int4 codes, inside one group since G % that == 0) each lane
// forms dot = sum u*x and sx = sum x, then acc += s*dot + o*sx: one scale/offset load per vector.
// One warp per output row, QG_WARPS rows per block; NT tokens share each weight load.
#include "ninfer/common.cuh"
#include "ninfer/fixed_point.cuh"
#include "ninfer/gdn_in_epilogue.cuh"

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

// Prefill of a weight in row packing (sm_75, GGUF mins, groups the tiles do not take): the dense [N, K] in T, for
// cuBLAS. Each thread one 16-byte vector of a row (32 int4 / 16 int8 codes, within one group: G % PER == 0), each
// value u * s + o in float32 from the CUDA-core kernel's scale and offset (gpu_params), one rounding to float32
// (an fma of an exact product where the scales are 16-bit: layout.dequantize's value bit for bit), one to T.
template <typename T, int BITS>
__device__ __forceinline__ void qdequant_rows(const uint4 *__restrict__ Wq, const float *__restrict__ S,
                                              const float *__restrict__ O, T *__restrict__ out, int N, int K,
                                              int G) {
    constexpr int PER = 128 / BITS;
    const int KV = K / PER, ng = K / G;
    const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = v < (i64)N * KV;
    const i64 n = v / KV;
    const int k0 = (int)(v - n * KV) * PER;
    uint4 w = make_uint4(0, 0, 0, 0);
    float s = 0.f, o = 0.f;
    if (live) {
        w = load_stream(Wq + v);
        s = __ldg(S + n * ng + k0 / G);
        o = __ldg(O + n * ng + k0 / G);
    }
    pdl_stream_enter();
    if (!live) return;
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int q = 0; q < PER / 8; q++) {
        float f[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int i = 8 * q + j;  // code i of the vector: word i / (32 / BITS), field i % (32 / BITS)
            const unsigned u = (words[i / (32 / BITS)] >> (BITS * (i % (32 / BITS)))) & ((1u << BITS) - 1);
            f[j] = __fmaf_rn((float)u, s, o);
        }
        *reinterpret_cast<uint4 *>(out + n * K + k0 + 8 * q) = pack8<T>(f);
    }
}

}  // namespace ninfer

#define QDEQR_KERNEL(S, T, B)                                                                                \
    extern "C" __global__ void __launch_bounds__(256) qdeqr_##S##_b##B(const uint4 *Wq, const float *Sc,     \
                                                                       const float *O, T *out, int N, int K, \
                                                                       int G) {                              \
        ninfer::qdequant_rows<T, B>(Wq, Sc, O, out, N, K, G);                                               \
    }

#define QG_KERNEL(S, T, B, NT)                                                                          \
    extern "C" __global__ void __launch_bounds__(QG_WARPS * 32) qgemv_##S##_b##B##_t##NT(              \
        const unsigned char *Wq, const float *Sc, const float *O, const T *x, const T *b, T *y, int N,  \
        int K, int G, int ntok) {                                                                       \
        ninfer::pdl_stream_enter();                                                                     \
        ninfer::qgemv<T, B, NT>(Wq, Sc, O, x, b, y, N, K, G, ntok);                                     \
    }

#define QG_WIDTHS(S, T, B) QG_KERNEL(S, T, B, 1) QG_KERNEL(S, T, B, 2) QG_KERNEL(S, T, B, 4) \
    QG_KERNEL(S, T, B, 8) QG_KERNEL(S, T, B, 16)

#if !defined(QM_BENCH_ONLY)
QG_WIDTHS(f16, __half, 8)
QG_WIDTHS(f16, __half, 4)
QDEQR_KERNEL(f16, __half, 8)
QDEQR_KERNEL(f16, __half, 4)
#ifndef QG_NO_BF16  // sm_75 backends serve fp16 only
QG_WIDTHS(bf16, __nv_bfloat16, 8)
QG_WIDTHS(bf16, __nv_bfloat16, 4)
QDEQR_KERNEL(bf16, __nv_bfloat16, 8)
QDEQR_KERNEL(bf16, __nv_bfloat16, 4)
#endif
#endif

// ---------------------------------------------------------------------------------------------------------
// Tensor-core GEMV/GEMM for decode and verify (sm_80+): weights repacked at load into 16-row tiles
// (ninfer.quant.layout.pack_tiles), one 16-byte load per lane holds the A fragments of 4 (int4) or 2 (int8)
// mma.m16n8k16 steps. Codes become exact small integers (u - z) in fp16/bf16 with bit tricks (int4: one lop3
// with the 0x6400 / 0x4300 exponent, then one fp16x2/bf16x2 subtract, no int->float conversion; int8: prmt),
// the MMA multiplies them by up to 8 tokens' activations (B fragment, column = token) into float32, and each
// group's partial sum is scaled by its float scale in float32 (no half-precision accumulation anywhere).
// A block owns one tile of 16 rows; its warps split K (chunks interleaved). Each warp keeps QM_U chunks in
// flight: a ring of weight vectors with their scales (and zero points), refilled QM_U chunks ahead by
// predicated loads (no branches), and the activations of the next chunk loaded one chunk ahead; group
// indices come from a float reciprocal (exact, see qm_group). The ring lives in registers with -DQM_REG_RING,
// which ninfer.quant.gpu always passes (measured faster on the H200, bench/RESULTS.md); without it, in shared
// memory through cp.async (slower there; kept with -DQM_RAW as measured variants for bench/quant.py). Warps meet in shared memory in a fixed order
// (deterministic). Needs group % 32 == 0, K % 64 (int4) / 32 (int8) == 0, 16-bit scales and an integer
// zero point (or none); everything else takes the kernel above.
#if defined(QG_MMA)
#ifndef QM_U
#if defined(QM_REG_RING)
#define QM_U 3  // chunks (16-byte weight loads) in flight per lane: 3 keeps int4 at 64 registers, 32 warps an SM
                // (74 and 24 with 4; Nsight Compute: issue-latency-bound). H200, 2026-12-03: e2e 27B W4A16 145.9
                // vs 140.8 tok/s, 8B W8A16 317.2 vs 294.5 (bench/RESULTS.md)
#else
#define QM_U 8  // keep in step with ninfer.quant.gpu.SMEM_RING
#endif
#endif
#define QM_MAX_WARPS 16
#if defined(QM_RAW)  // variant: offsets and zero points off by a second mma (see qmma)
#define defined_QM_RAW true
#else
#define defined_QM_RAW false
#endif

namespace ninfer {

// Predicated loads: when p is false nothing is read and the destination keeps its value (always finite here).
__device__ __forceinline__ void qm_load_w(uint4 &v, const uint4 *ptr, bool p) {  // streamed weights
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %5, 0;\n\t"
                 "@q ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
                 : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w) : "l"(ptr), "r"((int)p));
}

__device__ __forceinline__ void qm_load_x(uint4 &v, const uint4 *ptr, bool p) {  // activations: kept in L1
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %5, 0;\n\t"
                 "@q ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
                 : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w) : "l"(ptr), "r"((int)p));
}

__device__ __forceinline__ void qm_load_s(unsigned &v, const unsigned *ptr, bool p) {  // scales
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u32 %0, [%1];\n\t}"
                 : "+r"(v) : "l"(ptr), "r"((int)p));
}

__device__ __forceinline__ void qm_load_z(unsigned &v, const unsigned short *ptr, bool p) {  // zero points
    asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u16 %0, [%1];\n\t}"
                 : "+r"(v) : "l"(ptr), "r"((int)p));
}

// Asynchronous copies global -> shared memory, 16 bytes (weights, past L1, 256-byte L2 prefetch) or 4 (scales);
// when p is false nothing is read (src-size 0: ptr may point past the tensor) and the destination is zero-filled.
__device__ __forceinline__ void qm_cp16(unsigned dst, const void *ptr, bool p) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" :: "r"(dst), "l"(ptr), "r"(p ? 16 : 0));
}
__device__ __forceinline__ void qm_cp4(unsigned dst, const void *ptr, bool p) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(ptr), "r"(p ? 4 : 0));
}
__device__ __forceinline__ void qm_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void qm_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }
__device__ __forceinline__ uint4 qm_lds16(unsigned a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}
__device__ __forceinline__ unsigned qm_lds4(unsigned a) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

// Group of the 32-k half kk (k = 32 kk), G = 32 gpk: floor(kk / gpk) = floor((kk + 0.5) * (1 / gpk)). The
// quotient (kk + 0.5) / gpk is at least 0.5 / gpk from an integer and the float error is below
// 2^-23 (kk + 0.5) / gpk, so the rounding down is exact while kk < 2^21 (K < 2^26). kf = kk + 0.5.
__device__ __forceinline__ int qm_group(float kf, float rg) { return __float2int_rz(kf * rg); }

__device__ __forceinline__ unsigned lop_or(unsigned a, unsigned mask, unsigned c) {  // (a & mask) | c
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(c));
    return d;
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
// step(): exact (u - z). raw() (where RAW): the codes with their exponent bits only, exact offset values
// c + u (row g + 8 of fp16 int4: c + 16 u, hence its scale times S8 = 1/16), one lop3 / prmt a register;
// the offset and the zero point come off through a second mma of the same activations by the constant
// fragment neg = -(c + z) (exact), in float32: one mma instead of four half-precision subtractions.
template <typename T, int BITS> struct QmDeq;

template <> struct QmDeq<__half, 4> {  // word nibbles (n0..n7) = rows (g, g+8, g, g+8, g, g+8, g, g+8)
    static constexpr bool RAW = true;
    static constexpr float S8 = 0.0625f;
    unsigned zg, mg8, neg[4];          // half2 1024 + z_g; half2 -(64 + z_{g+8}); -(1024 + z_g), -(1024 + 16 z_{g+8})
    __device__ __forceinline__ void init(unsigned zz) {
        zg = (0x6400u | (zz & 0xFFu)) * 0x10001u;
        mg8 = (unsigned)__half_as_ushort(__float2half_rn(-64.f - (float)(zz >> 8))) * 0x10001u;
        neg[0] = neg[2] = zg | 0x80008000u;
        neg[1] = neg[3] = (unsigned)__half_as_ushort(__float2half_rn(-1024.f - 16.f * (float)(zz >> 8))) * 0x10001u;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0], x8 = x >> 8, e = 0x64006400u;
        a[0] = f16x2_sub(lop_or(x, 0x000F000Fu, e), zg);                  // 1024 + n - (1024 + z)
        a[1] = f16x2_fma(lop_or(x, 0x00F000F0u, e), 0x2C002C00u, mg8);    // (1024 + 16n) / 16 - (64 + z)
        a[2] = f16x2_sub(lop_or(x8, 0x000F000Fu, e), zg);
        a[3] = f16x2_fma(lop_or(x8, 0x00F000F0u, e), 0x2C002C00u, mg8);
    }
    __device__ __forceinline__ void raw(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0], x8 = x >> 8, e = 0x64006400u;
        a[0] = lop_or(x, 0x000F000Fu, e);  // 1024 + n
        a[1] = lop_or(x, 0x00F000F0u, e);  // 1024 + 16 n
        a[2] = lop_or(x8, 0x000F000Fu, e);
        a[3] = lop_or(x8, 0x00F000F0u, e);
    }
};

template <> struct QmDeq<__nv_bfloat16, 4> {  // bf16 has 7 mantissa bits: every nibble is moved to bit 0
    static constexpr bool RAW = true;
    static constexpr float S8 = 1.f;
    unsigned ng, ng8, neg[4];                  // bf16x2 -(128 + z)
    __device__ __forceinline__ void init(unsigned zz) {
        ng = (0xC300u | (zz & 0xFFu)) * 0x10001u;
        ng8 = (0xC300u | (zz >> 8)) * 0x10001u;
        neg[0] = neg[2] = ng;
        neg[1] = neg[3] = ng8;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0], e = 0x43004300u, m = 0x000F000Fu, one = 0x3F803F80u;
        a[0] = bf16x2_fma(lop_or(x, m, e), one, ng);  // (128 + n) * 1 - (128 + z)
        a[1] = bf16x2_fma(lop_or(x >> 4, m, e), one, ng8);
        a[2] = bf16x2_fma(lop_or(x >> 8, m, e), one, ng);
        a[3] = bf16x2_fma(lop_or(x >> 12, m, e), one, ng8);
    }
    __device__ __forceinline__ void raw(const unsigned *w, unsigned (&a)[4]) const {
        const unsigned x = w[0], e = 0x43004300u, m = 0x000F000Fu;
        a[0] = lop_or(x, m, e);  // 128 + n
        a[1] = lop_or(x >> 4, m, e);
        a[2] = lop_or(x >> 8, m, e);
        a[3] = lop_or(x >> 12, m, e);
    }
};

template <> struct QmDeq<__half, 8> {  // word bytes = (g, k), (g, k+1), (g+8, k), (g+8, k+1)
    static constexpr bool RAW = true;
    static constexpr float S8 = 1.f;
    unsigned zg, zg8, neg[4];          // half2 1024 + z; -(1024 + z)
    __device__ __forceinline__ void init(unsigned zz) {
        zg = (0x6400u | (zz & 0xFFu)) * 0x10001u;
        zg8 = (0x6400u | (zz >> 8)) * 0x10001u;
        neg[0] = neg[2] = zg | 0x80008000u;
        neg[1] = neg[3] = zg8 | 0x80008000u;
    }
    __device__ __forceinline__ void step(const unsigned *w, unsigned (&a)[4]) const {
        a[0] = f16x2_sub(__byte_perm(w[0], 0x64646464u, 0x4140), zg);
        a[1] = f16x2_sub(__byte_perm(w[0], 0x64646464u, 0x4342), zg8);
        a[2] = f16x2_sub(__byte_perm(w[1], 0x64646464u, 0x4140), zg);
        a[3] = f16x2_sub(__byte_perm(w[1], 0x64646464u, 0x4342), zg8);
    }
    __device__ __forceinline__ void raw(const unsigned *w, unsigned (&a)[4]) const {
        a[0] = __byte_perm(w[0], 0x64646464u, 0x4140);  // 1024 + u
        a[1] = __byte_perm(w[0], 0x64646464u, 0x4342);
        a[2] = __byte_perm(w[1], 0x64646464u, 0x4140);
        a[3] = __byte_perm(w[1], 0x64646464u, 0x4342);
    }
};

template <> struct QmDeq<__nv_bfloat16, 8> {  // through float32 2^23 + u, exact, then the top halves
    static constexpr bool RAW = false;           // 0..255 has no exact one-instruction bf16 form
    static constexpr float S8 = 1.f;
    float fg, fg8;                             // 2^23 + z
    unsigned neg[4];
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
    __device__ __forceinline__ void raw(const unsigned *w, unsigned (&a)[4]) const { step(w, a); }
};

template <typename X> struct QmTag { using type = X; };
template <typename A, typename B> struct QmSame { static constexpr bool value = false; };
template <typename A> struct QmSame<A, A> { static constexpr bool value = true; };

// bf16x2 -> fp16x2, each half rounded to nearest (exact in fp16's normal range); past 65504 infinite.
__device__ __forceinline__ unsigned bf16x2_to_f16x2(unsigned w) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(__uint_as_float(w & 0xFFFF0000u)), "f"(__uint_as_float(w << 16)));
    return d;
}

__device__ __forceinline__ float qm_scale(unsigned v, const __half *) { return __half2float(__ushort_as_half(v)); }
__device__ __forceinline__ float qm_scale(unsigned v, const __nv_bfloat16 *) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float qm_scale_hi(unsigned v, const __half *) {
    return __half2float(__ushort_as_half(v >> 16));
}
__device__ __forceinline__ float qm_scale_hi(unsigned v, const __nv_bfloat16 *) {
    return __uint_as_float(v & 0xFFFF0000u);
}

// Wp: tiles x (K / CHUNK) x 32 lanes of uint4; Sp: tiles x groups x 8 of (s_g | s_{g+8} << 16);
// Zp: tiles x groups x 8 of (z_g | z_{g+8} << 8) (ZP only). NSET token sets of 8 (NT = 8 or 16).
// MERGE: both halves of a chunk in one group (group % CHUNK == 0): one scale word and one flush per chunk.
template <typename T, typename ST, int BITS, bool ZP, int NSET, bool MERGE>
__device__ __forceinline__ void qmma(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                     const unsigned short *__restrict__ Zp, const T *__restrict__ x,
                                     const T *__restrict__ bias, T *__restrict__ y, int N, int K, int G,
                                     int ntok) {
    constexpr int CHUNK = BITS == 4 ? 64 : 32;  // k per lane's 16-byte load
    constexpr int HALVES = CHUNK / 32;         // a half: 32 k, two mma steps, one 16-byte activation load
    constexpr int SV = MERGE ? 1 : HALVES;     // scale words (groups) per chunk
    // -DQM_RAW, one token set: offsets and zero points off by a second mma (QmDeq::raw) instead of subtracted per
    // code (measured slower for int4 at 1 token on the H200, bench/RESULTS.md)
    constexpr bool RAW = QmDeq<T, BITS>::RAW && NSET == 1 && defined_QM_RAW;
    constexpr unsigned ZSYM = BITS == 4 ? 0x0808u : 0x8080u;
#if defined(QM_REG_RING)
    __shared__ float red_s[QM_MAX_WARPS][NSET * 4][32];
#endif
    const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x;
    const int nchunk = K / CHUNK, ng = K / G;
    const int mine = warp < nchunk ? (nchunk - 1 - warp) / warps + 1 : 0;  // chunks warp, warp + warps, ...
    // running pointers of the next chunk to fetch (weights, scales) and to load activations for
    const uint4 *wf = Wp + ((i64)tile * nchunk + warp) * 32 + lane;
    const i64 wstep = (i64)warps * 32;
    const unsigned *St = Sp + (i64)tile * ng * 8 + g;
    const unsigned short *Zt = ZP ? Zp + (i64)tile * ng * 8 + g : nullptr;
    const float rg = 32.f / (float)G, kstep = (float)(warps * HALVES);
    float kf = (float)(warp * HALVES) + 0.5f;  // qm_group's kk + 0.5 of the next chunk to fetch
    const uint4 *xf[NSET];
#pragma unroll
    for (int s = 0; s < NSET; s++)  // the B column of this lane is token g (+ 8); past ntok it repeats the last
        xf[s] = reinterpret_cast<const uint4 *>(x + (i64)min(g + 8 * s, ntok - 1) * K + 8 * t) + warp * (CHUNK / 8);
    const int xstep = warps * (CHUNK / 8);
    float acc[NSET][4];
#pragma unroll
    for (int s = 0; s < NSET; s++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[s][i] = 0.f;
    unsigned zv[QM_U][SV];  // zero points of the chunk's groups (ZP only), in registers
#if defined(QM_REG_RING)  // the default build: the ring in registers (QM_U x 5 registers a lane)
    uint4 wv[QM_U];
    unsigned sv[QM_U][SV];
    auto fetch = [&](int u, bool p) {  // chunk of the running pointers into ring slot u
        qm_load_w(wv[u], wf, p);
#pragma unroll
        for (int h = 0; h < SV; h++) {
            const unsigned gi = (unsigned)qm_group(h ? kf + (float)h : kf, rg);
            qm_load_s(sv[u][h], St + gi * 8u, p);
            if (ZP) qm_load_z(zv[u][h], Zt + gi * 8u, p);
        }
        wf += wstep;
        kf += kstep;
    };
    auto take = [&](int u, unsigned (&words)[4], unsigned (&cs)[SV]) {
        words[0] = wv[u].x, words[1] = wv[u].y, words[2] = wv[u].z, words[3] = wv[u].w;
#pragma unroll
        for (int h = 0; h < SV; h++) cs[h] = sv[u][h];
    };
#pragma unroll
    for (int u = 0; u < QM_U; u++) {
        wv[u] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int h = 0; h < SV; h++) sv[u][h] = 0;
    }
#else  // the ring in shared memory, filled by cp.async: no registers held by loads in flight
    // dynamic shared memory: warps x QM_U slots x 32 lanes x 16 bytes of codes, then warps x QM_U x SV x 32 scale
    // words; each lane reads back only what it copied itself (its own cp.async groups, no barrier)
    extern __shared__ uint4 qm_smem[];
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(qm_smem);
    const unsigned sw = sbase + (unsigned)((warp * QM_U * 32 + lane) * 16);
    const unsigned ss = sbase + (unsigned)(warps * QM_U * 512 + (warp * QM_U * SV * 32 + lane) * 4);
    auto fetch = [&](int u, bool p) {
        qm_cp16(sw + u * 512, wf, p);
#pragma unroll
        for (int h = 0; h < SV; h++) {
            const unsigned gi = (unsigned)qm_group(h ? kf + (float)h : kf, rg);
            qm_cp4(ss + (u * SV + h) * 128, St + gi * 8u, p);
            if (ZP) qm_load_z(zv[u][h], Zt + gi * 8u, p);
        }
        qm_commit();
        wf += wstep;
        kf += kstep;
    };
    auto take = [&](int u, unsigned (&words)[4], unsigned (&cs)[SV]) {
        qm_wait<QM_U - 1>();  // this lane's copies of chunk i are done (QM_U - 1 younger groups may be pending)
        const uint4 v = qm_lds16(sw + u * 512);
        words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
#pragma unroll
        for (int h = 0; h < SV; h++) cs[h] = qm_lds4(ss + (u * SV + h) * 128);
    };
#endif
#pragma unroll
    for (int u = 0; u < QM_U; u++)
#pragma unroll
        for (int h = 0; h < SV; h++) zv[u][h] = ZSYM;
    uint4 xv[NSET][HALVES];
    auto load_x = [&](bool p) {  // activations of the next chunk
#pragma unroll
        for (int s = 0; s < NSET; s++) {
#pragma unroll
            for (int h = 0; h < HALVES; h++) qm_load_x(xv[s][h], xf[s] + 4 * h, p);
            xf[s] += xstep;
        }
    };
#pragma unroll
    for (int s = 0; s < NSET; s++)
#pragma unroll
        for (int h = 0; h < HALVES; h++) xv[s][h] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < QM_U; u++) fetch(u, u < mine);
    // programmatic dependent launch (sm_90+): the first QM_U chunks of weights and scales (constants) are in
    // flight while the kernel before this one finishes; the activations it writes are read only after the wait
    pdl_stream_enter();
    load_x(mine > 0);
    // chunk i (ring slot u): dequantise, multiply and flush into acc with the group's scales, then refill
    // the slot QM_U chunks ahead and load the next chunk's activations.
    auto step = [&](int u, int i) {
        unsigned words[4], sv[SV];
        take(u, words, sv);
        float tmp[NSET][4];
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int j = 0; j < 4; j++) tmp[s][j] = 0.f;
#pragma unroll
        for (int h = 0; h < HALVES; h++) {
            const int hs = MERGE ? 0 : h;
            const unsigned cs = sv[hs], cz = ZP ? zv[u][hs] : ZSYM;
            QmDeq<T, BITS> dq;
            dq.init(cz);
#pragma unroll
            for (int s2 = 0; s2 < 2; s2++) {
                unsigned a[4];
                if (RAW)
                    dq.raw(words + (BITS == 4 ? 2 * h + s2 : 2 * s2), a);
                else
                    dq.step(words + (BITS == 4 ? 2 * h + s2 : 2 * s2), a);
#pragma unroll
                for (int s = 0; s < NSET; s++) {
                    const unsigned xw[4] = {xv[s][h].x, xv[s][h].y, xv[s][h].z, xv[s][h].w};
                    qm_mma(tmp[s], a, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                    if (RAW) qm_mma(tmp[s], dq.neg, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                }
            }
            if (h == HALVES - 1 || !MERGE) {
                const float s0 = qm_scale(cs & 0xFFFFu, (const ST *)nullptr);
                const float s1 = qm_scale_hi(cs, (const ST *)nullptr) * (RAW ? QmDeq<T, BITS>::S8 : 1.f);
#pragma unroll
                for (int s = 0; s < NSET; s++) {
                    acc[s][0] = fmaf(s0, tmp[s][0], acc[s][0]);
                    acc[s][1] = fmaf(s0, tmp[s][1], acc[s][1]);
                    acc[s][2] = fmaf(s1, tmp[s][2], acc[s][2]);
                    acc[s][3] = fmaf(s1, tmp[s][3], acc[s][3]);
#pragma unroll
                    for (int j = 0; j < 4; j++) tmp[s][j] = 0.f;
                }
            }
        }
        fetch(u, i + QM_U < mine);
        load_x(i + 1 < mine);
    };
    int i0 = 0;
    for (; i0 + QM_U <= mine; i0 += QM_U) {
#pragma unroll
        for (int u = 0; u < QM_U; u++) step(u, i0 + u);
    }
#pragma unroll
    for (int u = 0; u < QM_U - 1; u++)
        if (i0 + u < mine) step(u, i0 + u);
    if (warps > 1) {
#if defined(QM_REG_RING)
        float *red = &red_s[0][0][0];
#else
        float *red = reinterpret_cast<float *>(qm_smem);  // the ring, once every warp is done with it
        qm_wait<0>();
        __syncthreads();
#endif
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) red[(warp * NSET * 4 + s * 4 + i) * 32 + lane] = acc[s][i];
        __syncthreads();
        if (warp != 0) return;
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float v = red[(s * 4 + i) * 32 + lane];
                for (int w = 1; w < warps; w++) v += red[(w * NSET * 4 + s * 4 + i) * 32 + lane];
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


// ---------------------------------------------------------------------------------------------------------
// Split form of qmma (qmsk_*, the default for 9..16 tokens, see ninfer.quant.gpu.SPLIT_WIDTHS): the same
// tiles, fragments, dequantisation and ring of loads in flight, but the unit of work is one warp, not a block:
// tile i's chunks are cut into S contiguous parts, one warp each (warp gw = S i + part), blocks of any S warps
// side by side, so the grid's warps fill every SM evenly (S is chosen so that S x tiles is about the warps the
// GPU holds at once), whatever the number of tiles. With S > 1 the parts' float32 sums meet in a workspace: each
// warp stores its slot, counts itself on the tile's counter, and the last to arrive adds the S slots in order
// (deterministic), writes y and resets the counter for the next launch. Loads in flight per lane: QSK_U4 (int4) and
// QSK_U8 (int8) chunks, QM_U unless given (bench/quant.py's variants; -DQSK_U8=2 measured faster for int8 at 8 and
// 16 tokens on the H200, bench/RESULTS.md 2026-12-02 session 4, not yet through the GPU tests as a default).
#ifndef QSK_U4
#define QSK_U4 QM_U
#endif
#ifndef QSK_U8
#define QSK_U8 QM_U
#endif
template <typename T, typename ST, int BITS, bool ZP, int NSET, bool MERGE>
__device__ __forceinline__ void qmsk(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                     const unsigned short *__restrict__ Zp, const T *__restrict__ x,
                                     const T *__restrict__ bias, T *__restrict__ y, float *__restrict__ part,
                                     unsigned *__restrict__ cnt, int N, int K, int G, int ntok, int S) {
    constexpr int CHUNK = BITS == 4 ? 64 : 32;
    constexpr int U = BITS == 4 ? QSK_U4 : QSK_U8;  // chunks in flight per lane
    constexpr int HALVES = CHUNK / 32;
    constexpr int SV = MERGE ? 1 : HALVES;
    constexpr unsigned ZSYM = BITS == 4 ? 0x0808u : 0x8080u;
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int gw = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int tile = gw / S, sp = gw - tile * S;
    if (tile * 16 >= N) return;  // the grid's last block may hold more warps than S x tiles (no barrier below)
    const int nchunk = K / CHUNK, ng = K / G;
    const int k0 = nchunk * sp / S, mine = nchunk * (sp + 1) / S - k0;  // this warp's chunks k0 .. k0 + mine - 1
    const uint4 *wf = Wp + ((i64)tile * nchunk + k0) * 32 + lane;
    const unsigned *St = Sp + (i64)tile * ng * 8 + g;
    const unsigned short *Zt = ZP ? Zp + (i64)tile * ng * 8 + g : nullptr;
    const float rg = 32.f / (float)G;
    float kf = (float)(k0 * HALVES) + 0.5f;  // qm_group's kk + 0.5 of the next chunk to fetch
    const uint4 *xf[NSET];
#pragma unroll
    for (int s = 0; s < NSET; s++)
        xf[s] = reinterpret_cast<const uint4 *>(x + (i64)min(g + 8 * s, ntok - 1) * K + 8 * t) + k0 * (CHUNK / 8);
    float acc[NSET][4];
#pragma unroll
    for (int s = 0; s < NSET; s++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[s][i] = 0.f;
    uint4 wv[U];
    unsigned sv[U][SV], zv[U][SV];
    auto fetch = [&](int u, bool p) {
        qm_load_w(wv[u], wf, p);
#pragma unroll
        for (int h = 0; h < SV; h++) {
            const unsigned gi = (unsigned)qm_group(h ? kf + (float)h : kf, rg);
            qm_load_s(sv[u][h], St + gi * 8u, p);
            if (ZP) qm_load_z(zv[u][h], Zt + gi * 8u, p);
        }
        wf += 32;
        kf += (float)HALVES;
    };
#pragma unroll
    for (int u = 0; u < U; u++) {
        wv[u] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int h = 0; h < SV; h++) sv[u][h] = 0, zv[u][h] = ZSYM;
    }
    uint4 xv[NSET][HALVES];
    auto load_x = [&](bool p) {  // activations of the next chunk
#pragma unroll
        for (int s = 0; s < NSET; s++) {
#pragma unroll
            for (int h = 0; h < HALVES; h++) qm_load_x(xv[s][h], xf[s] + 4 * h, p);
            xf[s] += CHUNK / 8;
        }
    };
#pragma unroll
    for (int s = 0; s < NSET; s++)
#pragma unroll
        for (int h = 0; h < HALVES; h++) xv[s][h] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; u++) fetch(u, u < mine);
    pdl_stream_enter();  // as in qmma: the first U chunks are in flight while the previous kernel finishes
    load_x(mine > 0);
    auto step = [&](int u, int i) {
        const unsigned words[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
        float tmp[NSET][4];
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int j = 0; j < 4; j++) tmp[s][j] = 0.f;
#pragma unroll
        for (int h = 0; h < HALVES; h++) {
            const int hs = MERGE ? 0 : h;
            QmDeq<T, BITS> dq;
            dq.init(ZP ? zv[u][hs] : ZSYM);
#pragma unroll
            for (int s2 = 0; s2 < 2; s2++) {
                unsigned a[4];
                dq.step(words + (BITS == 4 ? 2 * h + s2 : 2 * s2), a);
#pragma unroll
                for (int s = 0; s < NSET; s++) {
                    const unsigned xw[4] = {xv[s][h].x, xv[s][h].y, xv[s][h].z, xv[s][h].w};
                    qm_mma(tmp[s], a, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                }
            }
            if (h == HALVES - 1 || !MERGE) {
                const float s0 = qm_scale(sv[u][hs] & 0xFFFFu, (const ST *)nullptr);
                const float s1 = qm_scale_hi(sv[u][hs], (const ST *)nullptr);
#pragma unroll
                for (int s = 0; s < NSET; s++) {
                    acc[s][0] = fmaf(s0, tmp[s][0], acc[s][0]);
                    acc[s][1] = fmaf(s0, tmp[s][1], acc[s][1]);
                    acc[s][2] = fmaf(s1, tmp[s][2], acc[s][2]);
                    acc[s][3] = fmaf(s1, tmp[s][3], acc[s][3]);
#pragma unroll
                    for (int j = 0; j < 4; j++) tmp[s][j] = 0.f;
                }
            }
        }
        fetch(u, i + U < mine);
        load_x(i + 1 < mine);
    };
    int i0 = 0;
    for (; i0 + U <= mine; i0 += U) {
#pragma unroll
        for (int u = 0; u < U; u++) step(u, i0 + u);
    }
#pragma unroll
    for (int u = 0; u < U - 1; u++)
        if (i0 + u < mine) step(u, i0 + u);
    if (S > 1) {  // the tile's parts meet in the workspace: slot gw, lane-major
        float *sl = part + (i64)gw * NSET * 128 + lane;
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) __stcg(sl + (s * 4 + i) * 32, acc[s][i]);
        __threadfence();
        __syncwarp();
        unsigned old = 0;
        if (lane == 0) old = atomicAdd(cnt + tile, 1u);
        old = __shfl_sync(0xFFFFFFFFu, old, 0);
        if (old != (unsigned)(S - 1)) return;
        __threadfence();  // the last part to arrive: add the S slots in order
        const float *q = part + (i64)tile * S * NSET * 128 + lane;
#pragma unroll
        for (int s = 0; s < NSET; s++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[s][i] = __ldcg(q + (s * 4 + i) * 32);
        for (int p = 1; p < S; p++)
#pragma unroll
            for (int s = 0; s < NSET; s++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[s][i] += __ldcg(q + (i64)p * NSET * 128 + (s * 4 + i) * 32);
        if (lane == 0) cnt[tile] = 0u;  // ready for the next launch
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

// ---------------------------------------------------------------------------------------------------------
// Decode form of qmma for one token (qmv1_*) and up to 8 (qmv8_*; see ninfer.quant.gpu.QMV1): the same tiles,
// dequantisation and block per tile, but each warp reads its weights in bursts of QMV_BURST consecutive chunks (QMV_BURST x 512 contiguous bytes,
// loaded together, then used), bursts interleaved over the block's warps, as the bf16 GEMV reads (a ring refilled one
// 512-byte load at a time lost 15 % on that kernel, bench/RESULTS.md session 5); activations a chunk at a time from L1.
// Measured on the H200 against qmma's ring (bench/RESULTS.md, 2026-12-03 session 6): GEMV-only int8 0.86 vs 0.73 of
// copy bandwidth, int4 0.68 vs 0.61. Bench variants: -DQMV_PIPE=1 (the next burst in flight while one is used),
// -DQMV_L2PF=d (L2 prefetch d rounds ahead), -DQMV_MAXREG: each slower there. (Raw codes into the MMA with the offset
// taken off by the chunks' activation sums, 18 fewer instructions a chunk, were slower too: not kept.)
// Groups are whole chunks (G = CHUNK 2^j); K a multiple of CHUNK QMV_BURST.
#ifndef QMV_BURST
#define QMV_BURST 4
#endif
// Registers a thread, by bits (-DQMV_MAXREG sets both): measured on the H200 (bench/RESULTS.md, 2026-12-03 session 6,
// GEMV only, fraction of copy bandwidth at 1 / 8 tokens): int4 0.675 / 0.621 at 80 (24 warps an SM), 0.659 / 0.567 at
// 72, 0.663 / 0.489 at 64 (a spill); int8 0.859 at 64 (32 warps), 0.802 at 80 (one token).
#ifdef QMV_MAXREG
#define QMV_MAXREG4 QMV_MAXREG
#define QMV_MAXREG8 QMV_MAXREG
#endif
#ifndef QMV_MAXREG4
#define QMV_MAXREG4 80
#endif
#ifndef QMV_MAXREG8
#define QMV_MAXREG8 64
#endif
#ifndef QMV_MAXREG16  // the 16-token form (both widths; off by default: slower than qmsk at 16 tokens, RESULTS)
#define QMV_MAXREG16 128
#endif
#ifndef QMV_L2PF  // > 0: each burst asks L2 for the warp's burst QMV_L2PF rounds ahead (prefetch.global.L2, no registers)
#define QMV_L2PF 0
#endif
#ifndef QMV_PREPF  // int4, one token: before its PDL wait each warp asks L2 for its next QMV_PREPF bursts as well, while
#define QMV_PREPF 2  // the kernel before still runs. On an H100 the 27B W4A16 decode +0.8-1.8 % at 2, -3 to -4 % at 4;
#endif               // int8 (the 8B W8A16) -5 % at 2, so int8 never (bench/RESULTS.md session 25; not run on the H200)
#ifndef QMV_FIX8P  // 1 (default): FIX8's burst loads predicated, no branch in its loop, as int4's (QMV_FIXFETCH); 0: a
#define QMV_FIX8P 1  // branch. On an H100 the 8B W8A16 decode -0.1 to +0.4 %, 7 of 8 pairs faster (RESULTS session 27)
#endif
#ifndef QMV_PIPE  // 1: the next burst is loaded while this one is used (2 QMV_BURST weight vectors a lane in registers)
#define QMV_PIPE 0
#endif
#ifndef QMV_X16  // 1: int8 codes with bf16 activations multiplied in fp16 (see qmv)
#define QMV_X16 1
#endif
#ifndef QMV_ADDR  // 1: int4 one-token bursts addressed from a stepped pointer, groups loaded once a burst (qmv: fetch)
#define QMV_ADDR 1
#endif
#ifndef QMV_XFIRST  // 1 (bench, with QMV_PIPE): a burst's activations are loaded before the next burst's weights, so
#define QMV_XFIRST 0  // that loads returning in order do not hold them behind those (a measurement)
#endif
#ifndef QMV_ZB  // 1 (bench): one token multiplies its activations into B column 0 only, the other 7 columns zero
#define QMV_ZB 0  // (lanes g != 0 mask theirs): the same sums, less tensor-core switching (a power/clock experiment)
#endif
#ifndef QMV_FIXFETCH  // 1: qmv1f's bursts load one scale a 128-k run at a computed group, every load predicated on
#define QMV_FIXFETCH 1  // b != warp, no branch in the loop (as bench/kernels/qmv_i8.cu); 0 (bench): qmv's fetch, behind
#endif                  // branches on b and the group size (27B W4A16 decode 2-4 % slower, H200, RESULTS session 24)
#ifndef QMV_PERSIST  // 1 (bench): the one-token int4 forms (qmv1, qmv1s, qmv1g) as persistent blocks (qmvp below)
#define QMV_PERSIST 0
#endif
#ifndef QMV_DIAG  // benchmark diagnostics only, results wrong: 1 the loads alone (no dequantisation, no products);
#define QMV_DIAG 0  // 2 every block reads tile blockIdx.x % 8's weights and scales (L2-resident): the products alone;
#endif              // 3 each warp reads its first burst again for every burst, through L1: the products, no HBM
// NS = 0: one token (qmv1_*); NS = 1, 2: NS sets of 8 tokens (qmv8_*: 1..8, qmv16_*: 9..16), the B fragment's column g
// of set s token 8 s + g (past ntok the last repeats).
// SILU (one token; qmv1s_*): the weight is [gate | up] (N = 2 I rows, I a multiple of 16) and y[n] = silu(gate_n . x)
// * (up_n . x) for n < I: grid I / 16, the block's first half of warps takes gate tile blockIdx.x, the second half
// up tile blockIdx.x + I / 16, each half as a plain launch of half the warps would (same sums, same bits), both
// rounded to T as the plain GEMM stores them, then SwiGLU as silu_mul computes it: no [1, 2 I] output and no second
// launch.
// Epi: what happens to a finished output y[tok, n] (the sum plus the bias): QmvStore stores it; qmv1g_* passes
// GdnInEpilogue (ninfer/gdn_in_epilogue.cuh: the Gated DeltaNet decode conv update and gates, as the dense
// gemv_gdn_in_* kernels run them). The SwiGLU form stores through y itself.
template <typename T>
struct QmvStore {
    T *y;
    int N;
    __device__ __forceinline__ void operator()(int tok, int n, float v) const { y[(i64)tok * N + n] = from_f<T>(v); }
};

// The scales (and zero points) of a one-token int4 burst b (chunks B b .. B b + B - 1, B a power of two): chunk u is in
// group ((B b) >> lg) + (u >> lg), lg = log2(G / CHUNK); each group's word is loaded once from the tile's rows St / Zt
// (qmv's QMV_ADDR form and qmvp). zsym: the zero-point word of a symmetric weight.
template <int B, bool ZP>
__device__ __forceinline__ void qmv_burst_groups(unsigned (&sv)[B], unsigned (&zv)[B], const unsigned *St,
                                                 const unsigned short *Zt, int b, int lg, unsigned zsym) {
    const int g0 = (b * B) >> lg;
    const unsigned *sb = St + g0 * 8;
    const unsigned short *zb = ZP ? Zt + g0 * 8 : nullptr;
    auto group = [&](int u, int du) {  // chunk u takes group g0 + du
        sv[u] = __ldg(sb + du * 8);
        zv[u] = ZP ? (unsigned)__ldg(zb + du * 8) : zsym;
    };
    if (lg == 0) {
#pragma unroll
        for (int u = 0; u < B; u++) group(u, u);
    } else if (lg == 1) {
#pragma unroll
        for (int u = 0; u < B; u += 2) {
            group(u, u / 2);
            if (u + 1 < B) sv[u + 1] = sv[u], zv[u + 1] = zv[u];
        }
    } else if (B <= 4) {  // lg >= 2: the whole burst in one group
        group(0, 0);
#pragma unroll
        for (int u = 1; u < B; u++) sv[u] = sv[0], zv[u] = zv[0];
    } else {
#pragma unroll
        for (int u = 0; u < B; u++) group(u, u >> lg);
    }
}

// QMV_PERSIST (a bench build, not yet measured): the one-token int4 burst GEMV as persistent blocks. The launcher
// gives blocks only as many as the GPU holds at once and K 16-bit activations of dynamic shared memory; block i takes
// tiles i, i + gridDim.x, ... The token's activations are copied into shared memory once a block (after the PDL
// wait) and read there (LDS) just before use; each warp's next burst, the next tile's first one included, is loaded
// while the current one is multiplied. Loads that return in order therefore never hold the activations behind the
// next burst's weights (what the register form QMV_PIPE does: it loads the activations after them), and a block's
// start (first loads, PDL wait) is paid once, not once a tile. Every tile's sums are qmv's for the same warps a tile,
// in the same order (same bits). SILU / Epi as qmv's.
template <typename T, typename ST, bool ZP, bool SILU, typename Epi>
__device__ __forceinline__ void qmvp(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                     const unsigned short *__restrict__ Zp, const T *__restrict__ x,
                                     const T *__restrict__ bias, T *__restrict__ y, int N, int K, int G,
                                     const Epi &epi) {
    constexpr int B = QMV_BURST, CHUNK = 64;
    extern __shared__ uint4 qmvp_x[];                    // the token's K activations
    __shared__ float red_p[2][QM_MAX_WARPS][2][32];      // by tile parity: each warp's rows g, g + 8 (column 0)
    const int nwarps = blockDim.x / 32, lane = threadIdx.x % 32;
    const int warps = SILU ? nwarps / 2 : nwarps;        // warps a tile
    const int half = SILU ? threadIdx.x / 32 / warps : 0;  // SILU: 0 the gate tiles, 1 the up tiles
    const int warp = threadIdx.x / 32 - half * warps;
    const int g = lane >> 2, t = lane & 3;
    const int ntile = SILU ? N / 32 : (N + 15) / 16;     // tiles of the loop (SILU: gate tiles; up tile = + ntile)
    const int nchunk = K / CHUNK, ng = K / G, nburst = nchunk / B;
    const int lg = __ffs(G) - 7;                         // log2(G / CHUNK)
    uint4 wv[B];
    unsigned sv[B], zv[B];
    auto fetch = [&](int tt, int b) {  // burst b of loop tile tt
        const int tile = tt + half * (SILU ? ntile : 0);
        const uint4 *wb = Wp + ((i64)tile * nchunk + (i64)b * B) * 32 + lane;
        const unsigned *St = Sp + (i64)tile * ng * 8 + g;
        const unsigned short *Zt = ZP ? Zp + (i64)tile * ng * 8 + g : nullptr;
#pragma unroll
        for (int u = 0; u < B; u++) qm_load_w(wv[u], wb + u * 32, true);
        qmv_burst_groups<B, ZP>(sv, zv, St, Zt, b, lg, 0x0808u);
    };
#pragma unroll
    for (int u = 0; u < B; u++) wv[u] = make_uint4(0, 0, 0, 0);
    int tt = blockIdx.x;
    if (tt < ntile && warp < nburst) fetch(tt, warp);  // the weights ahead of the wait
    pdl_stream_enter();
    const uint4 *x4 = reinterpret_cast<const uint4 *>(x);
    for (int i = threadIdx.x; i < K / 8; i += blockDim.x) qmvp_x[i] = __ldg(x4 + i);
    __syncthreads();
    const unsigned xs0 = (unsigned)__cvta_generic_to_shared(qmvp_x + t);
    for (int par = 0; tt < ntile; tt += gridDim.x, par ^= 1) {
        float acc0 = 0.f, acc2 = 0.f;  // rows g, g + 8 of column 0 (lanes t = 0; the other columns are copies)
        for (int b = warp; b < nburst; b += warps) {
            uint4 wc[B];
            unsigned sc[B], zc[B];
#pragma unroll
            for (int u = 0; u < B; u++) wc[u] = wv[u], sc[u] = sv[u], zc[u] = zv[u];
            if (b + warps < nburst) fetch(tt, b + warps);  // the next burst in flight meanwhile
            else if (tt + (int)gridDim.x < ntile) fetch(tt + gridDim.x, warp);
#pragma unroll
            for (int u = 0; u < B; u++) {
                const int c = b * B + u;
                const unsigned words[4] = {wc[u].x, wc[u].y, wc[u].z, wc[u].w};
                float tmp[4] = {0.f, 0.f, 0.f, 0.f};
                QmDeq<T, 4> dq;
                dq.init(zc[u]);
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const uint4 xv = qm_lds16(xs0 + (unsigned)(c * (CHUNK / 8) + 4 * h) * 16u);  // just before use
                    const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                    for (int s2 = 0; s2 < 2; s2++) {
                        unsigned a[4];
                        dq.step(words + 2 * h + s2, a);
                        qm_mma(tmp, a, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                    }
                }
                acc0 = fmaf(qm_scale(sc[u] & 0xFFFFu, (const ST *)nullptr), tmp[0], acc0);
                acc2 = fmaf(qm_scale_hi(sc[u], (const ST *)nullptr), tmp[2], acc2);
            }
        }
        red_p[par][half * warps + warp][0][lane] = acc0;
        red_p[par][half * warps + warp][1][lane] = acc2;
        __syncthreads();  // (red_p[par] is written again two tiles on, after every warp has passed the next one's)
        if (half * warps + warp != 0 || t != 0) continue;
        if (SILU) {  // as qmv: each half's warps in order, both rounded to T, then SwiGLU
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float gs = red_p[par][0][r][lane], us = red_p[par][warps][r][lane];
                for (int w = 1; w < warps; w++) gs += red_p[par][w][r][lane], us += red_p[par][warps + w][r][lane];
                const float gv = to_f(from_f<T>(gs)), uv = to_f(from_f<T>(us));
                y[tt * 16 + g + 8 * r] = from_f<T>(gv / (1.f + expf(-gv)) * uv);
            }
        } else {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float v = red_p[par][0][r][lane];
                for (int w = 1; w < warps; w++) v += red_p[par][w][r][lane];
                const int n = tt * 16 + g + 8 * r;
                if (n < N) epi(0, n, v + (bias ? to_f(bias[n]) : 0.f));
            }
        }
    }
}

// The one-token int4 products on the integer tensor cores (FIX, the qmv1f* entry points): the token comes as 16-bit
// fixed point a group of 128 k (ninfer.quant.fixed: x ~ sx q, q = 256 hi + lo, hi and lo signed bytes, made by the
// norm before the GEMV, fused.cuh add_rms_norm), xq the hi and lo bytes in the k order a lane's codes hold (k_order:
// [2][K / 64][t][word i][byte j] = 64 c + 32 (i >> 1) + 8 t + 4 (i & 1) + (0, 2, 1, 3)[j]), xg a group's {sx as float
// bits, sum of its q}. A code word becomes two registers of bytes (row g: w & 0x0F0F0F0F, row g + 8: (w >> 4) & ...),
// and one IMMA m16n8k32 (u8 x s8 -> s32, exact) takes 32 k of the tile's 16 rows with hi in B's even columns and lo in
// its odd ones, so lane (g, 0) holds both sums of its two rows. Per 128 k: 256 hi + lo - z sum(q) in int32, exact,
// then times s_w sx into the float32 sum. Against qmv1's bf16 dequantisation (3 shifts, 4 LOP3, 4 bf16 FMAs a word of
// 8 codes) a word takes 3 instructions; the activations one 16-byte load a chunk instead of two. Measured (bench/
// qmv_i8.py, bench/RESULTS.md session 23): the products alone take 15-30 % less time than qmv1's; with the weight
// from memory, on the H200 the 27B gate_up GEMV 0.91 of copy bandwidth against qmv1's 0.84, down 0.80 against 0.71,
// and its decode 4.5-5.6 % faster (session 24, with QMV_FIXFETCH). The default where the norm before it makes the form
// (gpu.QMV1F; NINFER_QMV1F=0 turns it off).
// Needs G % 128 == 0 (B a multiple of 2: each burst holds whole 128-k runs of one weight group).
// The SwiGLU form (qmv1sf) may write its output row in the same form for the down projection (oq, og not null; N / 2
// % 128 == 0): a group of 128 outputs comes from 8 blocks, so each block counts itself in ocnt[group] after its
// stores, and the eighth converts the group's stored values (read back from L2) and sets the count back to 0. The form
// is that of the final stored values, whichever block is last (fixed_point.cuh), so the bits do not depend on order.
struct QmvFixed {
    const uint4 *xq;
    const int2 *xg;
    unsigned char *oq = nullptr;
    int2 *og = nullptr;
    int *ocnt = nullptr;
};

__device__ __forceinline__ void qm_imma(int (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                        unsigned b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <typename T, typename ST, int BITS, bool ZP, int NS, bool SILU = false, typename Epi = QmvStore<T>,
          bool FIX = false, bool FROMX = false>
__device__ __forceinline__ void qmv(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                    const unsigned short *__restrict__ Zp, const T *__restrict__ x,
                                    const T *__restrict__ bias, T *__restrict__ y, int N, int K, int G, int ntok,
                                    const Epi &epi = Epi{}, QmvFixed fx = QmvFixed{}) {
    static_assert(!FIX || (NS == 0 && (BITS == 4 ? QMV_BURST % 2 == 0 : QMV_BURST == 4)),
                  "the fixed-point form: one token, int4 bursts of whole 128-k runs, int8 bursts of one");
    if constexpr (QMV_PERSIST && NS == 0 && BITS == 4 && !FIX) {
        qmvp<T, ST, ZP, SILU, Epi>(Wp, Sp, Zp, x, bias, y, N, K, G, epi);
        return;
    }
    constexpr int B = QMV_BURST;
    constexpr int CHUNK = BITS == 4 ? 64 : 32;  // k per lane's 16-byte load
    constexpr int HALVES = CHUNK / 32;          // 16-byte activation loads (and 2-mma steps) a chunk
    constexpr unsigned ZSYM = BITS == 4 ? 0x0808u : 0x8080u;
    constexpr bool ONE = NS == 0;
    constexpr int SETS = ONE ? 1 : NS;
    constexpr int NACC = ONE ? 2 : 4;  // a set's accumulators kept: ONE rows g, g + 8 of column 2t; else also 2t + 1
    __shared__ float red_s[QM_MAX_WARPS][SETS * NACC][32];
    const int nwarps = blockDim.x / 32, lane = threadIdx.x % 32;
    const int warps = SILU ? nwarps / 2 : nwarps;  // warps a tile
    const int half = SILU ? threadIdx.x / 32 / warps : 0;  // SILU: 0 the gate tile, 1 the up tile
    const int warp = threadIdx.x / 32 - half * warps;   // the warp within its tile
    const int g = lane >> 2, t = lane & 3;
    const unsigned zmask = g == 0 ? ~0u : 0u;  // QMV_ZB
    const int tile = blockIdx.x + half * (SILU ? gridDim.x : 0);
    const int nchunk = K / CHUNK, ng = K / G, nburst = nchunk / B;
    const int lg = __ffs(G) - (BITS == 4 ? 7 : 6);  // log2(G / CHUNK)
    const int wtile = QMV_DIAG == 2 ? tile % 8 : tile;
    const uint4 *Wt = Wp + (i64)wtile * nchunk * 32 + lane;
    const unsigned *St = Sp + (i64)wtile * ng * 8 + g;
    const unsigned short *Zt = ZP ? Zp + (i64)wtile * ng * 8 + g : nullptr;
    const uint4 *xt[SETS];
#pragma unroll
    for (int s = 0; s < SETS; s++)
        xt[s] = reinterpret_cast<const uint4 *>(x + (ONE ? 0 : (i64)min(8 * s + g, ntok - 1) * K) + 8 * t);
    uint4 wv[B];
    unsigned sv[B], zv[B];
    // burst b (chunks B b .. B b + B - 1, contiguous) from wb, the pointer to its first chunk. QMV_ADDR (the default,
    // int4, one token): the loop steps wb, the chunks sit at immediate offsets from it, and the burst's groups (chunk u
    // in group ((B b) >> lg) + (u >> lg), B a power of two) load once each from one pointer: 255 SASS instructions a
    // burst against 275, 27B W4A16 decode +2.5 % (H200, bench/RESULTS.md session 12). Otherwise (QMV_ADDR=0, int8 and
    // the 8- and 16-token forms, which it made slower: int8 one token -1 %, int4 at 8 tokens 0.620 against 0.659 of
    // copy bandwidth) every chunk's weight, scale and zero-point addresses are computed from b and u.
    auto load_w = [](uint4 &v, const uint4 *p) {  // QMV_DIAG 3: through L1, where the warp's first burst stays
        if (QMV_DIAG == 3) qm_load_x(v, p, true);
        else qm_load_w(v, p, true);
    };
    auto fetch = [&](const uint4 *wb, int b) {
        if (QMV_ADDR && ONE && BITS == 4) {
#pragma unroll
            for (int u = 0; u < B; u++) load_w(wv[u], wb + u * 32);
            qmv_burst_groups<B, ZP>(sv, zv, St, Zt, b, lg, ZSYM);
        } else {
#pragma unroll
            for (int u = 0; u < B; u++) {
                load_w(wv[u], Wt + (i64)(b * B + u) * 32);
                const int gi = (b * B + u) >> lg;
                sv[u] = __ldg(St + gi * 8);
                zv[u] = ZP ? (unsigned)__ldg(Zt + gi * 8) : ZSYM;
            }
        }
    };
    const i64 wstep = (i64)warps * B * 32;  // uint4s from one of this warp's bursts to its next
    const uint4 *wb = Wt + (i64)warp * B * 32;
#pragma unroll
    for (int u = 0; u < B; u++) wv[u] = make_uint4(0, 0, 0, 0);
    int b = warp;
    if (b < nburst) fetch(wb, b);
    if (QMV_PREPF > 0 && ONE && BITS == 4 && lane < 4 * B) {  // 4 B lines of 128 bytes a burst
#pragma unroll
        for (int p = 1; p <= QMV_PREPF; p++)
            if (b + p * warps < nburst) prefetch_l2(reinterpret_cast<const char *>(wb - lane + p * wstep) + lane * 128);
    }
    pdl_stream_enter();
    float acc[SETS][4];  // D fragments: rows g, g + 8 x columns (tokens 8 s +) 2t, 2t + 1
    // The loop over this warp's bursts, its products in MT (the activations' T, or fp16 for X16 below).
    auto run = [&](auto tag) {
        using MT = typename decltype(tag)::type;
        constexpr bool CVT = !QmSame<MT, T>::value;  // bf16 activations multiplied as fp16
#pragma unroll
        for (int s = 0; s < SETS; s++) acc[s][0] = acc[s][1] = acc[s][2] = acc[s][3] = 0.f;
        for (; b < nburst; b += warps, wb += wstep) {
            if (QMV_L2PF > 0 && lane < 4 * B && b + QMV_L2PF * warps < nburst) {  // 4 B lines of 128 bytes a burst
                const char *pf = reinterpret_cast<const char *>(Wp + ((i64)tile * nchunk + (i64)(b + QMV_L2PF * warps) * B)
                                                                * 32) + lane * 128;
                asm volatile("prefetch.global.L2 [%0];" :: "l"(pf));
            }
            if (!QMV_PIPE && b != warp) {
                if (QMV_DIAG == 3) fetch(Wt + (i64)warp * B * 32, warp);  // the first burst again
                else fetch(wb, b);
            }
            uint4 wc[B];
            unsigned sc[B], zc[B];
#pragma unroll
            for (int u = 0; u < B; u++) wc[u] = wv[u], sc[u] = sv[u], zc[u] = zv[u];
            uint4 xa[QMV_XFIRST ? B : 1][SETS][HALVES];  // QMV_XFIRST: the burst's activations, loaded first
            if (QMV_XFIRST && QMV_DIAG != 1) {
#pragma unroll
                for (int u = 0; u < (QMV_XFIRST ? B : 1); u++)
#pragma unroll
                    for (int s = 0; s < SETS; s++)
#pragma unroll
                        for (int h = 0; h < HALVES; h++)
                            qm_load_x(xa[u][s][h], xt[s] + (b * B + u) * (CHUNK / 8) + 4 * h, true);
            }
            if (QMV_PIPE && b + warps < nburst) fetch(wb + wstep, b + warps);  // the next burst in flight meanwhile
#pragma unroll
            for (int u = 0; u < B; u++) {
                if (QMV_DIAG == 1) {  // the loads alone: each word enters the sum, nothing else
                    acc[0][0] += __uint_as_float(((wc[u].x ^ wc[u].y ^ wc[u].z ^ wc[u].w ^ sc[u] ^ zc[u]) & 0x007FFFFFu)
                                                 | 0x3F800000u);
                    continue;
                }
                const int c = b * B + u;
                uint4 xv[SETS][HALVES];  // this chunk's activations (L1), loaded here: ahead they would hold registers
#pragma unroll
                for (int s = 0; s < SETS; s++)
#pragma unroll
                    for (int h = 0; h < HALVES; h++) {
                        if (QMV_XFIRST) xv[s][h] = xa[QMV_XFIRST ? u : 0][s][h];
                        else qm_load_x(xv[s][h], xt[s] + c * (CHUNK / 8) + 4 * h, true);
                    }
                const unsigned words[4] = {wc[u].x, wc[u].y, wc[u].z, wc[u].w};
                float tmp[SETS][4];
#pragma unroll
                for (int s = 0; s < SETS; s++) tmp[s][0] = tmp[s][1] = tmp[s][2] = tmp[s][3] = 0.f;
                QmDeq<MT, BITS> dq;
                dq.init(zc[u]);
#pragma unroll
                for (int h = 0; h < HALVES; h++) {
#pragma unroll
                    for (int s2 = 0; s2 < 2; s2++) {
                        unsigned a[4];
                        dq.step(words + (BITS == 4 ? 2 * h + s2 : 2 * s2), a);
#pragma unroll
                        for (int s = 0; s < SETS; s++) {
                            const unsigned xw[4] = {xv[s][h].x, xv[s][h].y, xv[s][h].z, xv[s][h].w};
                            const unsigned b0 = CVT ? bf16x2_to_f16x2(xw[2 * s2]) : xw[2 * s2];
                            const unsigned b1 = CVT ? bf16x2_to_f16x2(xw[2 * s2 + 1]) : xw[2 * s2 + 1];
                            if (QMV_ZB && ONE) qm_mma(tmp[s], a, b0 & zmask, b1 & zmask, (const MT *)nullptr);
                            else qm_mma(tmp[s], a, b0, b1, (const MT *)nullptr);
                        }
                    }
                }
                const float s0 = qm_scale(sc[u] & 0xFFFFu, (const ST *)nullptr);
                const float s1 = qm_scale_hi(sc[u], (const ST *)nullptr);
#pragma unroll
                for (int s = 0; s < SETS; s++) {
                    acc[s][0] = fmaf(s0, tmp[s][0], acc[s][0]);
                    acc[s][2] = fmaf(s1, tmp[s][2], acc[s][2]);
                    if (!ONE) {
                        acc[s][1] = fmaf(s0, tmp[s][1], acc[s][1]);
                        acc[s][3] = fmaf(s1, tmp[s][3], acc[s][3]);
                    }
                }
            }
        }
    };
    // X16 (int8 codes, bf16 activations; -DQMV_X16=0 turns it off): the activations are converted to fp16 as they
    // are loaded (exact for 2^-14 <= |x| <= 65504; below, fp16's subnormal step 2^-24) and the codes take the fp16
    // form (one PRMT and one subtraction a register against bf16's five instructions through float32): on the H200
    // the 8B's int8 GEMVs 0.87-0.88 of copy bandwidth against 0.85 at one token, 0.83 against 0.77 at eight
    // (bench/RESULTS.md, 2026-12-04 session 15). An activation past fp16's range becomes
    // infinite and makes every sum it enters infinite or NaN; then the block (every warp, whatever its part)
    // computes the tile again in bf16, so the result is the bf16 kernel's. Finite activations give finite sums in
    // fp16 (|code| <= 255, |x| <= 65504: far below float32's range).
    constexpr bool X16 = QMV_X16 && BITS == 8 && QmSame<T, __nv_bfloat16>::value;
    if constexpr (FIX && BITS == 8) {
        // int8 (FIX8): a burst is 4 chunks of 32 k, one 128-k group. A lane's 16 bytes of a chunk are rows g, g + 8 at
        // k 8t..8t+7 of it (words (g, k), (g, k+1), (g+8, k), (g+8, k+1), k = 8t, 8t+2, 8t+4, 8t+6), so one PRMT a
        // register puts them in the order the int4 form's k_order gives the token's bytes, (0, 2, 1, 3) a word:
        // the norms' form serves int8 weights unchanged, and a chunk is one IMMA with no dequantisation at all
        // (against qmv1's 8 PRMT, 8 fp16 subtractions, 2 HMMA and the activations' bf16 -> fp16 conversion).
        constexpr int GB = B / 4;  // 128-k groups a burst: one (the loop in this form compiles to the SASS measured)
        acc[0][0] = acc[0][2] = 0.f;
        const uint4 *xb = FROMX ? nullptr : fx.xq + (i64)(g & 1) * (K / 64) * 4 + t + warp * (B / 2) * 4;
        const int2 *gb = FROMX ? nullptr : fx.xg + warp * GB;
        __shared__ __align__(16) unsigned xs8[FROMX ? QM_MAX_WARPS : 1][2][FROMX ? B * 16 : 1];  // 2 bursts' forms
        int par = 0;
        for (; b < nburst; b += warps, wb += wstep, xb += warps * (B / 2) * 4, gb += warps * GB, par ^= 1) {
            float rsx = 0.f;
            int rqs = 0;
            const uint4 *xf = reinterpret_cast<const uint4 *>(xs8[FROMX ? threadIdx.x / 32 : 0][par]) + (g & 1) * (B / 2) * 4 + t;
            if constexpr (FROMX) {  // qmv1x: this burst's form from the row (fixed_point.cuh), into this warp's buffer
                fixed_burst<T, B * 32>(x + (i64)b * B * 32, xs8[threadIdx.x / 32][par], lane, rsx, rqs);
                __syncwarp();
            }
            if (QMV_FIX8P || b != warp) {  // QMV_FIX8P: every load predicated, no branch (as int4's QMV_FIXFETCH)
                const bool p = b != warp;
#pragma unroll
                for (int u = 0; u < B; u++) qm_load_w(wv[u], wb + u * 32, p);
#pragma unroll
                for (int q = 0; q < GB; q++) {
                    const int gi = (b * B + 4 * q) >> lg;
                    qm_load_s(sv[4 * q], St + gi * 8, p);
                    if (ZP) qm_load_z(zv[4 * q], Zt + gi * 8, p);
                }
            }
            uint4 wc[B];
            unsigned sc[GB], zc[GB];
#pragma unroll
            for (int u = 0; u < B; u++) wc[u] = wv[u];
#pragma unroll
            for (int q = 0; q < GB; q++) sc[q] = sv[4 * q], zc[q] = zv[4 * q];
#pragma unroll
            for (int q = 0; q < GB; q++) {
                int d[4] = {0, 0, 0, 0};
#pragma unroll
                for (int h = 2 * q; h < 2 * q + 2; h++) {  // 64 k: chunks 2h (the form's words 0, 1), 2h + 1 (2, 3)
                    uint4 xv;
                    if (FROMX) xv = xf[h * 4];
                    else qm_load_x(xv, xb + h * 4, true);
                    const uint4 w0 = wc[2 * h], w1 = wc[2 * h + 1];
                    qm_imma(d, __byte_perm(w0.x, w0.y, 0x5140), __byte_perm(w0.x, w0.y, 0x7362),
                            __byte_perm(w0.z, w0.w, 0x5140), __byte_perm(w0.z, w0.w, 0x7362), xv.x, xv.y);
                    qm_imma(d, __byte_perm(w1.x, w1.y, 0x5140), __byte_perm(w1.x, w1.y, 0x7362),
                            __byte_perm(w1.z, w1.w, 0x5140), __byte_perm(w1.z, w1.w, 0x7362), xv.z, xv.w);
                }
                const int2 gx = FROMX ? make_int2(__float_as_int(__shfl_sync(~0u, rsx, q * (128 / B))),
                                                  __shfl_sync(~0u, rqs, q * (128 / B)))
                                      : __ldg(gb + q);
                const float sx = __int_as_float(gx.x);
                const int v0 = d[0] * 256 + d[1] - (int)(zc[q] & 0xFFu) * gx.y;
                const int v2 = d[2] * 256 + d[3] - (int)((zc[q] >> 8) & 0xFFu) * gx.y;
                acc[0][0] = fmaf(qm_scale(sc[q] & 0xFFFFu, (const ST *)nullptr) * sx, (float)v0, acc[0][0]);
                acc[0][2] = fmaf(qm_scale_hi(sc[q], (const ST *)nullptr) * sx, (float)v2, acc[0][2]);
            }
        }
    } else if constexpr (FIX) {
        acc[0][0] = acc[0][2] = 0.f;
        // this warp's activations and groups, stepped with its bursts: hi for even g (B's even columns), lo for odd
        const uint4 *xb = FROMX ? nullptr : fx.xq + (i64)(g & 1) * nchunk * 4 + t + warp * B * 4;
        const int2 *gb = FROMX ? nullptr : fx.xg + warp * (B / 2);
        __shared__ __align__(16) unsigned xs4[FROMX ? QM_MAX_WARPS : 1][2][FROMX ? B * 32 : 1];  // 2 bursts' forms
        int par = 0;
        for (; b < nburst; b += warps, wb += wstep, xb += warps * B * 4, gb += warps * (B / 2), par ^= 1) {
            float rsx = 0.f;
            int rqs = 0;
            const uint4 *xf = reinterpret_cast<const uint4 *>(xs4[FROMX ? threadIdx.x / 32 : 0][par]) + (g & 1) * B * 4 + t;
            if constexpr (FROMX) {  // qmv1x: this burst's form from the row (fixed_point.cuh), into this warp's buffer
                fixed_burst<T, B * 64>(x + (i64)b * B * 64, xs4[threadIdx.x / 32][par], lane, rsx, rqs);
                __syncwarp();
            }
            if (QMV_FIXFETCH && QMV_DIAG != 3) {  // the scales (zero points) of runs 2q only, no branch
                const bool p = b != warp;
#pragma unroll
                for (int u = 0; u < B; u++) qm_load_w(wv[u], wb + u * 32, p);
#pragma unroll
                for (int q = 0; q < B; q += 2) {
                    const int gi = (b * B + q) >> lg;
                    qm_load_s(sv[q], St + gi * 8, p);
                    if (ZP) qm_load_z(zv[q], Zt + gi * 8, p);
                }
            } else if (b != warp) {
                if (QMV_DIAG == 3) fetch(Wt + (i64)warp * B * 32, warp);  // the first burst again
                else fetch(wb, b);
            }
            uint4 wc[B];
            unsigned sc[B], zc[B];
#pragma unroll
            for (int u = 0; u < B; u++) wc[u] = wv[u], sc[u] = sv[u], zc[u] = zv[u];
#pragma unroll
            for (int q = 0; q < B; q += 2) {  // 128 k of one group
                int d[4] = {0, 0, 0, 0};
#pragma unroll
                for (int u = q; u < q + 2; u++) {
                    uint4 xv;
                    if (FROMX) xv = xf[u * 4];
                    else qm_load_x(xv, xb + u * 4, true);
                    const unsigned m = 0x0F0F0F0Fu;
                    const uint4 w = wc[u];
                    qm_imma(d, w.x & m, (w.x >> 4) & m, w.y & m, (w.y >> 4) & m, xv.x, xv.y);
                    qm_imma(d, w.z & m, (w.z >> 4) & m, w.w & m, (w.w >> 4) & m, xv.z, xv.w);
                }
                const int2 gx = FROMX ? make_int2(__float_as_int(__shfl_sync(~0u, rsx, q * 8)), __shfl_sync(~0u, rqs, q * 8))
                                      : __ldg(gb + q / 2);
                const float sx = __int_as_float(gx.x);
                const int v0 = d[0] * 256 + d[1] - (int)(zc[q] & 0xFFu) * gx.y;
                const int v2 = d[2] * 256 + d[3] - (int)((zc[q] >> 8) & 0xFFu) * gx.y;
                acc[0][0] = fmaf(qm_scale(sc[q] & 0xFFFFu, (const ST *)nullptr) * sx, (float)v0, acc[0][0]);
                acc[0][2] = fmaf(qm_scale_hi(sc[q], (const ST *)nullptr) * sx, (float)v2, acc[0][2]);
            }
        }
    } else if constexpr (X16) {
        run(QmTag<__half>{});
        bool bad = false;
#pragma unroll
        for (int s = 0; s < SETS; s++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                if (!ONE || i % 2 == 0) bad |= !(fabsf(acc[s][i]) <= 3.402823466e38f);  // NaN or infinite
        if (__syncthreads_or(bad)) {
            b = warp;
            wb = Wt + (i64)warp * B * 32;
            if (b < nburst) fetch(wb, b);
            run(QmTag<T>{});
        }
    } else {
        run(QmTag<T>{});
    }
    constexpr int IDX[4] = {0, 2, 1, 3};  // acc index of slot i: ONE keeps slots 0, 1
    if (SILU) {  // each half's warps in order, as a plain launch adds them; then SwiGLU on the two tiles' rows
        static_assert(!SILU || ONE, "the SwiGLU form takes one token");
#pragma unroll
        for (int i = 0; i < NACC; i++) red_s[half * warps + warp][i][lane] = acc[0][IDX[i]];
        __syncthreads();
        const bool fout = FIX && fx.ocnt != nullptr;  // grid-uniform
        if (half * warps + warp != 0 || (t != 0 && !fout)) return;
        if (t == 0) {
#pragma unroll
            for (int r = 0; r < 2; r++) {  // slot r: row g + 8 r of each tile
                float gs = red_s[0][r][lane], us = red_s[warps][r][lane];
                for (int w = 1; w < warps; w++) gs += red_s[w][r][lane], us += red_s[warps + w][r][lane];
                const float gv = to_f(from_f<T>(gs)), uv = to_f(from_f<T>(us));  // as the plain GEMM stores them
                y[blockIdx.x * 16 + g + 8 * r] = from_f<T>(gv / (1.f + expf(-gv)) * uv);
            }
        }
        if (fout) {  // warp 0: the last of a group's 8 blocks writes the group's fixed-point form
            __threadfence();
            __syncwarp();
            const int grp = blockIdx.x >> 3;
            int last = lane == 0 ? atomicAdd(fx.ocnt + grp, 1) == 7 : 0;
            if (!__shfl_sync(0xffffffffu, last, 0)) return;
            __threadfence();
            float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            const int v = grp * 16 + (lane & 15);
            if (lane < 16) {  // past L1 (other SMs' stores), and not moved above the fence (volatile, memory clobber)
                uint4 u;
                asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(reinterpret_cast<const uint4 *>(y) + v)
                             : "memory");
                unpack8<T>(u, a);
            }
            fixed_group16(a, v, lane < 16, fx.oq, fx.og, N / 2);
            if (lane == 0) fx.ocnt[grp] = 0;
        }
        return;
    }
    if (warps > 1) {
#pragma unroll
        for (int s = 0; s < SETS; s++)
#pragma unroll
            for (int i = 0; i < NACC; i++) red_s[warp][s * NACC + i][lane] = acc[s][IDX[i]];
        __syncthreads();
        if (warp != 0) return;
#pragma unroll
        for (int s = 0; s < SETS; s++)
#pragma unroll
            for (int i = 0; i < NACC; i++) {
                float v = red_s[0][s * NACC + i][lane];
                for (int w = 1; w < warps; w++) v += red_s[w][s * NACC + i][lane];
                acc[s][IDX[i]] = v;
            }
    }
    if (ONE && t != 0) return;  // lane (g, 0) holds rows g, g + 8 of token 0
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int n = tile * 16 + g + 8 * r;
        if (n >= N) continue;
        const float bb = bias ? to_f(bias[n]) : 0.f;
#pragma unroll
        for (int s = 0; s < SETS; s++)
#pragma unroll
            for (int j = 0; j < (ONE ? 1 : 2); j++) {
                const int tok = 8 * s + 2 * t + j;
                if (tok < ntok) epi(tok, n, acc[s][2 * r + j] + bb);
            }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Prefill (more tokens than the GEMV kernels take): a tiled weight dequantised into a dense row-major [N, K] in T
// (packed column order), for cuBLAS. Each thread takes one lane's 16-byte vector of one chunk: int4 rows g, g + 8 at
// columns 8t..8t+7 and 32+8t..32+8t+7 of the chunk (layout.py: _tile_order), int8 the same rows at 8t..8t+7; each
// value (u - z) * s in float32, rounded once to T, as layout.dequantize computes it (bit for bit), stored 8 at a
// time. The weight is read past L1 with the GEMVs' 256-byte L2 hint; outputs written after the PDL wait.
template <typename T, typename ST, int BITS, bool ZP>
__device__ __forceinline__ void qdequant(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                         const unsigned short *__restrict__ Zp, T *__restrict__ out, int N, int K,
                                         int G) {
    constexpr int CHUNK = BITS == 4 ? 64 : 32;
    constexpr int RUNS = CHUNK / 32;  // runs of 8 columns a row: int4 two (8t, 32 + 8t), int8 one
    constexpr unsigned ZSYM = BITS == 4 ? 0x0808u : 0x8080u;
    const int nchunk = K / CHUNK, ng = K / G;
    const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 total = (i64)((N + 15) / 16) * nchunk * 32;
    const bool live = v < total;
    const int lane = (int)(v & 31), g = lane >> 2, t = lane & 3;
    const i64 tc = v >> 5;
    const int c = (int)(tc % nchunk), tile = (int)(tc / nchunk);
    uint4 w = make_uint4(0, 0, 0, 0);
    qm_load_w(w, Wp + v, live);
    unsigned sv[RUNS], zv[RUNS];
#pragma unroll
    for (int r = 0; r < RUNS; r++) {
        const int gi = (c * CHUNK + 32 * r + 8 * t) / G;  // 8 columns never straddle a group (G % 32 == 0)
        sv[r] = 0;
        zv[r] = ZSYM;
        const i64 at = ((i64)tile * ng + gi) * 8 + g;
        if (live) sv[r] = __ldg(Sp + at);
        if (ZP && live) zv[r] = __ldg(Zp + at);
    }
    pdl_stream_enter();
    if (!live) return;
    const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int h = 0; h < 2; h++) {  // row g + 8 h
        const int n = tile * 16 + g + 8 * h;
        if (n >= N) continue;
#pragma unroll
        for (int r = 0; r < RUNS; r++) {
            const float sc = h ? qm_scale_hi(sv[r], (const ST *)nullptr) : qm_scale(sv[r] & 0xFFFFu, (const ST *)nullptr);
            const float z = (float)((zv[r] >> (8 * h)) & 0xFFu);
            float f[8];
            if (BITS == 4) {  // word 2r + q: columns 32r + 8t + 4q + j, nibble h + {0, 4, 2, 6}[j]
#pragma unroll
                for (int q = 0; q < 2; q++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const int i = h + (j == 0 ? 0 : j == 1 ? 4 : j == 2 ? 2 : 6);
                        f[4 * q + j] = ((float)((words[2 * r + q] >> (4 * i)) & 0xFu) - z) * sc;
                    }
            } else {  // word 2s + wd: columns 8t + 4s + 2wd + e, byte 2h + e
#pragma unroll
                for (int wi = 0; wi < 4; wi++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        f[2 * wi + e] = ((float)((words[wi] >> (8 * (2 * h + e))) & 0xFFu) - z) * sc;
            }
            *reinterpret_cast<uint4 *>(out + (i64)n * K + c * CHUNK + 32 * r + 8 * t) = pack8<T>(f);
        }
    }
}

}  // namespace ninfer

#define QM_KERNEL(S, T, SS, ST, B, Z, ZN, NSET, NT)                                                        \
    extern "C" __global__ void __launch_bounds__(QM_MAX_WARPS * 32) qmma_##S##_s##SS##_b##B##_##ZN##_t##NT( \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G, int ntok) {                                                                           \
        if (G % (B == 4 ? 64 : 32) == 0) /* uniform: the whole block takes one variant */                  \
            ninfer::qmma<T, ST, B, Z, NSET, true>(Wp, Sp, Zp, x, b, y, N, K, G, ntok);                      \
        else                                                                                                \
            ninfer::qmma<T, ST, B, Z, NSET, false>(Wp, Sp, Zp, x, b, y, N, K, G, ntok);                     \
    }

#define QSK_KERNEL(S, T, SS, ST, B, Z, ZN, NSET, NT)                                                       \
    extern "C" __global__ void __launch_bounds__(QM_MAX_WARPS * 32) qmsk_##S##_s##SS##_b##B##_##ZN##_t##NT(     \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, float *part, \
        unsigned *cnt, int N, int K, int G, int ntok, int S) {                                              \
        if (G % (B == 4 ? 64 : 32) == 0) /* uniform: the whole grid takes one variant */                     \
            ninfer::qmsk<T, ST, B, Z, NSET, true>(Wp, Sp, Zp, x, b, y, part, cnt, N, K, G, ntok, S);         \
        else                                                                                                \
            ninfer::qmsk<T, ST, B, Z, NSET, false>(Wp, Sp, Zp, x, b, y, part, cnt, N, K, G, ntok, S);        \
    }

#define QMV1_KERNEL(S, T, SS, ST, B, Z, ZN)                                                                  \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1_##S##_s##SS##_b##B##_##ZN(                   \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G) {                                                                                     \
        ninfer::qmv<T, ST, B, Z, 0>(Wp, Sp, Zp, x, b, y, N, K, G, 1, ninfer::QmvStore<T>{y, N});                \
    }                                                                                                       \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv8_##S##_s##SS##_b##B##_##ZN(                   \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G, int ntok) {                                                                           \
        ninfer::qmv<T, ST, B, Z, 1>(Wp, Sp, Zp, x, b, y, N, K, G, ntok, ninfer::QmvStore<T>{y, N});             \
    }                                                                                                       \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG16) qmv16_##S##_s##SS##_b##B##_##ZN(                   \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G, int ntok) {                                                                           \
        ninfer::qmv<T, ST, B, Z, 2>(Wp, Sp, Zp, x, b, y, N, K, G, ntok, ninfer::QmvStore<T>{y, N});             \
    }
// qmv1f*: the int4 and int8 one-token forms (plain, SwiGLU, Gated DeltaNet input) with the token in fixed point (FIX
// above); qmv1x: the plain form for a row with no form, each warp making its bursts' (FROMX).
#define QMV1F_KERNEL(S, T, SS, ST, B, Z, ZN)                                                                    \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1f_##S##_s##SS##_b##B##_##ZN(                         \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const uint4 *xq, const int2 *xg,       \
        const T *b, T *y, int N, int K, int G) {                                                            \
        ninfer::qmv<T, ST, B, Z, 0, false, ninfer::QmvStore<T>, true>(Wp, Sp, Zp, nullptr, b, y, N, K, G, 1,   \
                                                                    ninfer::QmvStore<T>{y, N},               \
                                                                    ninfer::QmvFixed{xq, xg});              \
    }                                                                                                       \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1x_##S##_s##SS##_b##B##_##ZN(                         \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, const T *b, T *y, int N,   \
        int K, int G) {                                                                                     \
        ninfer::qmv<T, ST, B, Z, 0, false, ninfer::QmvStore<T>, true, true>(Wp, Sp, Zp, x, b, y, N, K, G, 1,    \
                                                                          ninfer::QmvStore<T>{y, N},         \
                                                                          ninfer::QmvFixed{nullptr, nullptr}); \
    }                                                                                                       \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1sf_##S##_s##SS##_b##B##_##ZN(                        \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const uint4 *xq, const int2 *xg, T *y,  \
        int N, int K, int G, unsigned char *oq, int2 *og, int *ocnt) {                                      \
        ninfer::qmv<T, ST, B, Z, 0, true, ninfer::QmvStore<T>, true>(Wp, Sp, Zp, nullptr, nullptr, y, N, K, G, \
                                                                   1, ninfer::QmvStore<T>{y, N},             \
                                                                   ninfer::QmvFixed{xq, xg, oq, og, ocnt}); \
    }                                                                                                       \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1gf_##S##_s##SS##_b##B##_##ZN(                        \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const uint4 *xq, const int2 *xg, T *y,  \
        int N, int K, int G, const T *conv_w, float *conv_state, const float *A_log, const float *dt_bias,    \
        float *g, T *beta, int conv_dim, int z_dim, int nh) {                                               \
        ninfer::qmv<T, ST, B, Z, 0, false, ninfer::GdnInEpilogue<T>, true>(                                 \
            Wp, Sp, Zp, nullptr, nullptr, y, N, K, G, 1,                                                    \
            ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, conv_dim, z_dim, nh},   \
            ninfer::QmvFixed{xq, xg});                                                                      \
    }
#define QMV1S_KERNEL(S, T, SS, ST, B, Z, ZN)                                                                 \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1s_##S##_s##SS##_b##B##_##ZN(                  \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, T *y, int N, int K, int G) { \
        ninfer::qmv<T, ST, B, Z, 0, true>(Wp, Sp, Zp, x, nullptr, y, N, K, G, 1);                           \
    }
// qmv1g_*: a Gated DeltaNet layer's one-token input projection, rows [q|k|v (conv_dim) | z (z_dim) | b (nh) | a (nh)],
// with the conv update and the gates in the epilogue (GdnInEpilogue): y [1, conv_dim + z_dim], g [1, nh] fp32,
// beta [1, nh]; each sum as the plain qmv1 launch of the same weight makes it.
#define QMV1G_KERNEL(S, T, SS, ST, B, Z, ZN)                                                                 \
    extern "C" __global__ void __maxnreg__(QMV_MAXREG##B) qmv1g_##S##_s##SS##_b##B##_##ZN(                  \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, const T *x, T *y, int N, int K, int G,  \
        const T *conv_w, float *conv_state, const float *A_log, const float *dt_bias, float *g, T *beta,       \
        int conv_dim, int z_dim, int nh) {                                                                  \
        ninfer::qmv<T, ST, B, Z, 0, false, ninfer::GdnInEpilogue<T>>(                                       \
            Wp, Sp, Zp, x, nullptr, y, N, K, G, 1,                                                          \
            ninfer::GdnInEpilogue<T>{y, conv_w, conv_state, A_log, dt_bias, g, beta, conv_dim, z_dim, nh});  \
    }
// qdeq_*: the prefill dequantisation (qdequant): one thread a lane's 16-byte vector, 256 a block.
#define QDEQ_KERNEL(S, T, SS, ST, B, Z, ZN)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) qdeq_##S##_s##SS##_b##B##_##ZN(                         \
        const uint4 *Wp, const unsigned *Sp, const unsigned short *Zp, T *out, int N, int K, int G) {          \
        ninfer::qdequant<T, ST, B, Z>(Wp, Sp, Zp, out, N, K, G);                                             \
    }
#define QMV1_ZP(S, T, SS, ST, B) QMV1_KERNEL(S, T, SS, ST, B, false, sym) QMV1_KERNEL(S, T, SS, ST, B, true, zp) \
    QMV1S_KERNEL(S, T, SS, ST, B, false, sym) QMV1S_KERNEL(S, T, SS, ST, B, true, zp)                          \
    QMV1G_KERNEL(S, T, SS, ST, B, false, sym) QMV1G_KERNEL(S, T, SS, ST, B, true, zp)                          \
    QDEQ_KERNEL(S, T, SS, ST, B, false, sym) QDEQ_KERNEL(S, T, SS, ST, B, true, zp)
#define QMV1F_B(S, T, B) QMV1F_KERNEL(S, T, f16, __half, B, false, sym) QMV1F_KERNEL(S, T, f16, __half, B, true, zp) \
    QMV1F_KERNEL(S, T, bf16, __nv_bfloat16, B, false, sym) QMV1F_KERNEL(S, T, bf16, __nv_bfloat16, B, true, zp)
#define QMV1_ALL(S, T) QMV1_ZP(S, T, f16, __half, 4) QMV1_ZP(S, T, bf16, __nv_bfloat16, 4) \
    QMV1_ZP(S, T, f16, __half, 8) QMV1_ZP(S, T, bf16, __nv_bfloat16, 8)                         \
    QMV1F_B(S, T, 4) QMV1F_B(S, T, 8)

#define QM_WIDTHS(S, T, SS, ST, B, Z, ZN) QM_KERNEL(S, T, SS, ST, B, Z, ZN, 1, 8) QM_KERNEL(S, T, SS, ST, B, Z, ZN, 2, 16) \
    QSK_KERNEL(S, T, SS, ST, B, Z, ZN, 1, 8) QSK_KERNEL(S, T, SS, ST, B, Z, ZN, 2, 16)
#define QM_ZP(S, T, SS, ST, B) QM_WIDTHS(S, T, SS, ST, B, false, sym) QM_WIDTHS(S, T, SS, ST, B, true, zp)
#define QM_SCALES(S, T, B) QM_ZP(S, T, f16, __half, B) QM_ZP(S, T, bf16, __nv_bfloat16, B)

#if defined(QM_BENCH_ONLY)  // bench/quant.py's variants (other QM_U): bf16 activations, fp16 scales, symmetric
QM_WIDTHS(bf16, __nv_bfloat16, f16, __half, 4, false, sym)
QM_WIDTHS(bf16, __nv_bfloat16, f16, __half, 8, false, sym)
#else
QM_SCALES(f16, __half, 4)
QM_SCALES(f16, __half, 8)
QMV1_ALL(f16, __half)
QMV1_ALL(bf16, __nv_bfloat16)
QM_SCALES(bf16, __nv_bfloat16, 4)
QM_SCALES(bf16, __nv_bfloat16, 8)
#endif
#endif  // QG_MMA
