#pragma once
// One token's activations in the 16-bit fixed point of the quantised int4 one-token GEMV (ninfer.quant.fixed,
// qgemv.cu qmv1f*): per group of 128 values sx = max |x| / 32512 (1 for a zero group), q = rint(x * (1 / sx)) (the
// reciprocal rounded to float, the product exact, rounded once, ties to even), q = 256 hi + lo
// with hi, lo signed bytes, stored in the GEMV's k order (8 consecutive values: two words of hi, two of lo, bytes
// (0, 2, 1, 3) of each 4); xg[group] = {sx bits, sum of q}. Written by the norm before the GEMV (fused.cuh), by the
// SwiGLU GEMV's epilogue for the down projection (qgemv.cu), by the attention output gate (elementwise.cuh) and by
// the Gated DeltaNet recurrence's output norm (gdn_recurrent.cuh) for the output projections.
#include "common.cuh"

namespace ninfer {

// NINFER_FIXED_DIV (measurements only): q through a division, max(-32512, min(32512, rint(a / sx))), as before session
// 28 (about 3 q in 10 000 of random bf16 rows differ by one from the reciprocal's).
#ifndef NINFER_FIXED_DIV
#define NINFER_FIXED_DIV 0
#endif

// q (= 256 hi + lo, |q| <= 32512) of value a in a group of scale sx and inv = __frcp_rn(sx): a * inv + 1.5 2^23 in
// one FMA lies in [2^23, 2^24), where a float's step is 1, so it is rounded at the units (ties to even) and its bits
// less 1.5 2^23's are q. |a| <= 32512 sx, so |q| <= 32512 (a * inv is within a relative 2^-22 of a / sx). The norm
// kernel's form took ~0.9 of its 3.2 us with a division per value, ~0.5 of 2.8 us so (H100, bench/pdl_handoff.py).
__device__ __forceinline__ int fixed_q(float a, float sx, float inv) {
    if (NINFER_FIXED_DIV) return max(-32512, min(32512, __float2int_rn(__fdiv_rn(a, sx))));
    return (int)(__float_as_uint(fmaf(a, inv, 12582912.f)) - 0x4B400000u);
}

// A group of 128 values held by 16 consecutive lanes (a half warp), 8 each: values 8v .. 8v + 7 of a row of H in a,
// v's group v >> 4. Every lane of the warp calls it (shuffles over the whole warp, each half its own group); a lane
// with !valid writes nothing (its a must hold zeros or its half's values).
__device__ __forceinline__ void fixed_group16(const float (&a)[8], int v, bool valid, unsigned char *__restrict__ xq,
                                              int2 *__restrict__ xg, int H) {
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(a[i]));
#pragma unroll
    for (int o = 8; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));  // the 16 of a group
    const float sx = m > 0.f ? __fdiv_rn(m, 32512.f) : 1.f, inv = __frcp_rn(sx);
    int hi[8], lo[8], qs = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int q = fixed_q(a[i], sx, inv);
        qs += q;
        hi[i] = (q + 128) >> 8;
        lo[i] = q - 256 * hi[i];
    }
#pragma unroll
    for (int o = 8; o; o >>= 1) qs += __shfl_xor_sync(0xffffffffu, qs, o);
    if (!valid) return;
    auto word = [](const int *b) {  // bytes (b0, b2, b1, b3)
        return (unsigned)(b[0] & 0xFF) | (unsigned)(b[2] & 0xFF) << 8 | (unsigned)(b[1] & 0xFF) << 16
               | (unsigned)(b[3] & 0xFF) << 24;
    };
    // values 8v..8v+7: chunk v / 8, lane t = v & 3, words 2 ((v >> 2) & 1) and the next
    const int wi = ((v >> 3) * 4 + (v & 3)) * 4 + 2 * ((v >> 2) & 1);
    *reinterpret_cast<uint2 *>(xq + 4 * wi) = make_uint2(word(hi), word(hi + 4));
    *reinterpret_cast<uint2 *>(xq + H + 4 * wi) = make_uint2(word(lo), word(lo + 4));
    if ((v & 15) == 0) xg[v >> 4] = make_int2(__float_as_int(sx), qs);
}

// A group of 128 values held by a whole warp, 4 each: lane l holds values 4 l .. 4 l + 3 of group grp of a row of H
// (the same bits as fixed_group16 writes for them). Every lane of the warp calls it.
__device__ __forceinline__ void fixed_group32(const float (&a)[4], int grp, unsigned char *__restrict__ xq,
                                              int2 *__restrict__ xg, int H) {
    const int lane = threadIdx.x % 32;
    float m = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) m = fmaxf(m, fabsf(a[i]));
#pragma unroll
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float sx = m > 0.f ? __fdiv_rn(m, 32512.f) : 1.f, inv = __frcp_rn(sx);
    int hi[4], lo[4], qs = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int q = fixed_q(a[i], sx, inv);
        qs += q;
        hi[i] = (q + 128) >> 8;
        lo[i] = q - 256 * hi[i];
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) qs += __shfl_xor_sync(0xffffffffu, qs, o);
    auto word = [](const int *b) {  // bytes (b0, b2, b1, b3)
        return (unsigned)(b[0] & 0xFF) | (unsigned)(b[2] & 0xFF) << 8 | (unsigned)(b[1] & 0xFF) << 16
               | (unsigned)(b[3] & 0xFF) << 24;
    };
    const int v = grp * 16 + lane / 2;  // values 8 v .. 8 v + 7: this lane's are the first or the second 4
    const int wi = ((v >> 3) * 4 + (v & 3)) * 4 + 2 * ((v >> 2) & 1) + (lane & 1);
    *reinterpret_cast<unsigned *>(xq + 4 * wi) = word(hi);
    *reinterpret_cast<unsigned *>(xq + H + 4 * wi) = word(lo);
    if (lane == 0) xg[grp] = make_int2(__float_as_int(sx), qs);
}

// The form of one burst of a one-token GEMV (qgemv.cu qmv1x*), made by the warp that multiplies it from the 16-bit
// float row, where no op before the GEMV writes the form (down, lm_head). The burst's KB values
// (256 int4, 128 int8), VPL a lane, become the form's bytes of ninfer.quant.fixed (hi, lo planes in k_order, KB / 4
// words each) in ``buf``; sx and the sum of q of the lane's 128-k group come back in every lane of it. q as fixed_q makes
// it, through x * (1 / sx) + 1.5 2^23 + 128, whose low 16 bits are q + 128: hi is its byte 1, lo its byte 0 ^ 0x80.
template <typename T, int KB>
__device__ __forceinline__ void fixed_burst(const T *__restrict__ xk, unsigned *buf, int lane, float &sx, int &qs) {
    constexpr int VPL = KB / 32, LPG = 128 / VPL;  // values a lane; lanes a 128-k group
    static_assert(VPL == 8 || VPL == 4, "bursts of 256 or 128 k");
    float v[VPL];
    if constexpr (VPL == 8) {
        const uint4 r = __ldg(reinterpret_cast<const uint4 *>(xk) + lane);
        const T *e = reinterpret_cast<const T *>(&r);
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = to_f(e[j]);
    } else {
        const uint2 r = __ldg(reinterpret_cast<const uint2 *>(xk) + lane);
        const T *e = reinterpret_cast<const T *>(&r);
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = to_f(e[j]);
    }
    float m = 0.f;
#pragma unroll
    for (int j = 0; j < VPL; j++) m = fmaxf(m, fabsf(v[j]));
#pragma unroll
    for (int o = LPG / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
    sx = m > 0.f ? __fdiv_rn(m, 32512.f) : 1.f;
    const float inv = __frcp_rn(sx);
    unsigned bits[VPL], sum = 0u;
#pragma unroll
    for (int j = 0; j < VPL; j++) {
        bits[j] = __float_as_uint(fmaf(v[j], inv, 12583040.f));
        sum += bits[j];
    }
    int q = (int)(sum - (unsigned)VPL * 0x4B400080u);
#pragma unroll
    for (int o = LPG / 2; o > 0; o >>= 1) q += __shfl_xor_sync(~0u, q, o);
    qs = q;
#pragma unroll
    for (int w = 0; w < VPL / 4; w++) {  // k 4 w' .. 4 w' + 3 (w' = VPL / 4 lane + w): one word a plane
        const unsigned a = __byte_perm(bits[4 * w], bits[4 * w + 1], 0x5410);
        const unsigned c = __byte_perm(bits[4 * w + 2], bits[4 * w + 3], 0x5410);
        const int k4 = VPL * lane + 4 * w, r = k4 & 63;
        const int off = ((k4 >> 6) * 4 + ((r & 31) >> 3)) * 4 + 2 * (r >> 5) + ((r >> 2) & 1);
        buf[off] = __byte_perm(a, c, 0x7351);
        buf[KB / 4 + off] = __byte_perm(a, c, 0x6240) ^ 0x80808080u;
    }
}

}  // namespace ninfer
