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

QG_WIDTHS(f16, __half, 8)
QG_WIDTHS(f16, __half, 4)
#ifndef QG_NO_BF16  // sm_75 backends serve fp16 only
QG_WIDTHS(bf16, __nv_bfloat16, 8)
QG_WIDTHS(bf16, __nv_bfloat16, 4)
#endif
