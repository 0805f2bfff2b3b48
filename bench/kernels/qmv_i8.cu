// A bench kernel (bench/qmv_i8.py appends this file to ninfer-core's qgemv.cu and compiles the two as one source):
// the one-token int4 GEMV with the products on the integer tensor cores. main's qmv1 turns each int4 code into a
// bf16 value (3 shifts, 4 LOP3 and 4 bf16 FMAs a word of 8 codes) and multiplies bf16 activations with HMMA. Here
// the token is given as 16-bit fixed point a group of k (x ~ sx (256 hi + lo), hi and lo signed bytes, sx a float a
// group; made by the caller), a code word becomes two registers of unsigned bytes with one LOP3 and one shift + LOP3,
// and one IMMA m16n8k32 (u8 x s8 -> s32, exact) takes 32 k of 16 rows with hi in B's even columns and lo in its odd
// ones, so lane t = 0 holds both sums. Per group: (256 hi + lo - z sum(x_q)) in int32, exact, then scaled once in
// float32 by s_w sx. Same tiles (ninfer.quant.layout.pack_tiles), scales and bursts as qmv1; symmetric int4 (zero
// point 8), G = 64 I8_CPG, bf16 output.
//
// xq: [2 (hi, lo)][K / 64 chunks][4 lanes t][4 words i][4 bytes j] = x_part[64 c + 32 (i >> 1) + 8 t + 4 (i & 1) + (0, 2,
// 1, 3)[j]], the k order of the codes a lane holds (see QmDeq<T, 4>); xg: per group {sx as float bits, sum of the
// group's 16-bit values}.
#ifndef I8_B
#define I8_B 4  // chunks a burst
#endif
#ifndef I8_CPG
#define I8_CPG 2  // chunks a group (G = 128)
#endif
#ifndef I8_DIAG  // 3 (a measurement, results wrong): each warp reads its first burst again for every burst, through L1
#define I8_DIAG 0
#endif
#ifndef I8_MAXREG
#define I8_MAXREG 64
#endif
#ifndef I8_PIPE  // 1: the next burst's weights are loaded before this burst's products
#define I8_PIPE 0
#endif
#ifndef I8_SPLIT  // 1: each chunk's two IMMAs sum into their own accumulators (no chain across a group's chunks)
#define I8_SPLIT 0
#endif

namespace ninfer {
namespace i8 {
__device__ __forceinline__ void imma(int (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                     unsigned b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
}  // namespace i8
}  // namespace ninfer

extern "C" __global__ void __maxnreg__(I8_MAXREG) qmvi8_bf16_sf16_b4_sym(const uint4 *__restrict__ Wp,
                                                                        const unsigned *__restrict__ Sp,
                                                                        const uint4 *__restrict__ xq,
                                                                        const int2 *__restrict__ xg,
                                                                        __nv_bfloat16 *__restrict__ y, int N, int K) {
    using namespace ninfer;
    constexpr int B = I8_B, CPG = I8_CPG, GPB = B / CPG;  // groups a burst
    static_assert(B % CPG == 0, "a burst holds whole groups");
    __shared__ float red[QM_MAX_WARPS][2][32];
    const int warps = blockDim.x / 32, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x;
    const int nchunk = K / 64, ng = nchunk / CPG, nburst = nchunk / B;
    const uint4 *Wt = Wp + (i64)tile * nchunk * 32 + lane;
    const unsigned *St = Sp + (i64)tile * ng * 8 + g;
    const uint4 *xl = xq + (i64)(g & 1) * nchunk * 4 + t;  // hi for even g (B's even columns), lo for odd
    uint4 wv[B];
    unsigned sv[GPB];
    const i64 wstep = (i64)warps * B * 32;  // uint4s from one of this warp's bursts to its next
    auto fetch = [&](const uint4 *wb, int b) {
        if (I8_DIAG == 3) wb = Wt + (i64)warp * B * 32;
#pragma unroll
        for (int u = 0; u < B; u++) {
            if (I8_DIAG == 3) qm_load_x(wv[u], wb + u * 32, true);
            else qm_load_w(wv[u], wb + u * 32, true);
        }
        const unsigned *sb = St + b * GPB * 8;
#pragma unroll
        for (int q = 0; q < GPB; q++) sv[q] = __ldg(sb + q * 8);
    };
#pragma unroll
    for (int u = 0; u < B; u++) wv[u] = make_uint4(0, 0, 0, 0);
    int b = warp;
    const uint4 *wb = Wt + (i64)warp * B * 32;
    const uint4 *xb = xl + warp * B * 4;
    const int2 *gb = xg + warp * GPB;
    if (b < nburst) fetch(wb, b);
    pdl_stream_enter();
    float acc0 = 0.f, acc2 = 0.f;
    for (; b < nburst; b += warps, wb += wstep, xb += warps * B * 4, gb += warps * GPB) {
        if (!I8_PIPE && b != warp) fetch(wb, b);
        uint4 wc[B];
        unsigned sc[GPB];
#pragma unroll
        for (int u = 0; u < B; u++) wc[u] = wv[u];
#pragma unroll
        for (int q = 0; q < GPB; q++) sc[q] = sv[q];
        if (I8_PIPE && b + warps < nburst) fetch(wb + wstep, b + warps);
#pragma unroll
        for (int q = 0; q < GPB; q++) {
            int d[CPG][4];
#pragma unroll
            for (int u = 0; u < CPG; u++) d[u][0] = d[u][1] = d[u][2] = d[u][3] = 0;
#pragma unroll
            for (int u = q * CPG; u < (q + 1) * CPG; u++) {
                uint4 xv;
                qm_load_x(xv, xb + u * 4, true);
                const uint4 w = wc[u];
                const unsigned m = 0x0F0F0F0Fu;
                int (&dd)[4] = d[I8_SPLIT ? u - q * CPG : 0];
                i8::imma(dd, w.x & m, (w.x >> 4) & m, w.y & m, (w.y >> 4) & m, xv.x, xv.y);
                i8::imma(dd, w.z & m, (w.z >> 4) & m, w.w & m, (w.w >> 4) & m, xv.z, xv.w);
            }
#pragma unroll
            for (int u = 1; u < (I8_SPLIT ? CPG : 1); u++)
#pragma unroll
                for (int e = 0; e < 4; e++) d[0][e] += d[u][e];
            const int2 gx = __ldg(gb + q);
            const float sx = __int_as_float(gx.x);
            const int v0 = d[0][0] * 256 + d[0][1] - 8 * gx.y, v2 = d[0][2] * 256 + d[0][3] - 8 * gx.y;
            acc0 = fmaf(qm_scale(sc[q] & 0xFFFFu, (const __half *)nullptr) * sx, (float)v0, acc0);
            acc2 = fmaf(qm_scale_hi(sc[q], (const __half *)nullptr) * sx, (float)v2, acc2);
        }
    }
    red[warp][0][lane] = acc0;
    red[warp][1][lane] = acc2;
    __syncthreads();
    if (warp != 0 || t != 0) return;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float v = red[0][r][lane];
        for (int w = 1; w < warps; w++) v += red[w][r][lane];
        const int n = tile * 16 + g + 8 * r;
        if (n < N) y[n] = __float2bfloat16(v);
    }
}
