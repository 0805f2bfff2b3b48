// RMSNorm over rows: y = x * rsqrt(mean(x^2) + eps) * w (or * (1 + w) when zero-centred), and the Gated
// DeltaNet output norm (times silu(z)). blockDim.x threads share one row, blockDim.y rows per block;
// a row of at most 4 * blockDim.x 16-byte vectors is read once, into registers.
// Needs H % 8 == 0 and 16-byte aligned rows: the Python side checks and falls back otherwise.
#pragma once
#include "common.cuh"

namespace ninfer {

template <typename T, bool ZERO_CENTRED, bool GATED>
__device__ __forceinline__ void rms_norm(const T *__restrict__ x, const T *__restrict__ z, const T *__restrict__ w,
                                         T *__restrict__ y, int rows, int H, int x_stride, float eps) {
    constexpr int NV = 4;
    __shared__ float scratch[32][32];
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    const bool live = row < rows;
    const int HV = H / 8;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + (i64)(live ? row : 0) * x_stride);
    const uint4 *wr = reinterpret_cast<const uint4 *>(w);
    uint4 *yr = reinterpret_cast<uint4 *>(y + (i64)row * H);
    const uint4 *zr = reinterpret_cast<const uint4 *>(z + (i64)(live ? row : 0) * H);
    if (NORM_ONE_PASS && HV <= NV * (int)blockDim.x) {  // block-uniform: the row in registers, all loads at once
        uint4 xv[NV], wv[NV], zv[NV];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            if (live && v < HV) {
                xv[j] = xr[v];
                wv[j] = wr[v];
                if (GATED) zv[j] = zr[v];
            }
        }
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            if (live && v < HV) {
                float f[8];
                unpack8<T>(xv[j], f);
#pragma unroll
                for (int i = 0; i < 8; i++) ss = fmaf(f[i], f[i], ss);
            }
        }
        // every thread of the block reaches the reduction, live row or not
        ss = row_sum(ss, scratch[threadIdx.y]);
        if (!live) return;
        const float r = rsqrtf(ss / (float)H + eps);
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int v = threadIdx.x + j * blockDim.x;
            if (v < HV) {
                float f[8], g[8];
                unpack8<T>(xv[j], f);
                unpack8<T>(wv[j], g);
#pragma unroll
                for (int i = 0; i < 8; i++) f[i] = f[i] * r * (ZERO_CENTRED ? 1.f + g[i] : g[i]);
                if (GATED) {
                    float zz[8];
                    unpack8<T>(zv[j], zz);
#pragma unroll
                    for (int i = 0; i < 8; i++) f[i] *= zz[i] / (1.f + expf(-zz[i]));
                }
                yr[v] = pack8<T>(f);
            }
        }
        return;
    }
    float ss = 0.f;
    if (live) {
        for (int v = threadIdx.x; v < HV; v += blockDim.x) {
            float f[8];
            unpack8<T>(xr[v], f);
#pragma unroll
            for (int i = 0; i < 8; i++) ss = fmaf(f[i], f[i], ss);
        }
    }
    ss = row_sum(ss, scratch[threadIdx.y]);
    if (!live) return;
    const float r = rsqrtf(ss / (float)H + eps);
    for (int v = threadIdx.x; v < HV; v += blockDim.x) {
        float f[8], g[8];
        unpack8<T>(xr[v], f);
        unpack8<T>(wr[v], g);
#pragma unroll
        for (int i = 0; i < 8; i++) f[i] = f[i] * r * (ZERO_CENTRED ? 1.f + g[i] : g[i]);
        if (GATED) {
            float zz[8];
            unpack8<T>(zr[v], zz);
#pragma unroll
            for (int i = 0; i < 8; i++) f[i] *= zz[i] / (1.f + expf(-zz[i]));
        }
        yr[v] = pack8<T>(f);
    }
}

}  // namespace ninfer
