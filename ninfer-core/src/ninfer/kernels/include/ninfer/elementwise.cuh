// SwiGLU, KV-cache writes and greedy argmax: small memory-bound kernels.
#pragma once
#include "common.cuh"
#include "fixed_point.cuh"

namespace ninfer {

// x: [T, 2I] = [gate | up] -> y: [T, I] = silu(gate) * up; one thread per 8 outputs. Needs I % 8 == 0.
template <typename T>
__device__ __forceinline__ void silu_mul(const T *__restrict__ x, T *__restrict__ y, int ntok, int I) {
    const int IV = I / 8;
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (i64)ntok * IV) return;
    const i64 t = idx / IV, j = idx % IV;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + t * 2 * I);
    float g[8], u[8];
    unpack8<T>(xr[j], g);
    unpack8<T>(xr[IV + j], u);
#pragma unroll
    for (int i = 0; i < 8; i++) g[i] = g[i] / (1.f + expf(-g[i])) * u[i];
    reinterpret_cast<uint4 *>(y + t * I)[j] = pack8<T>(g);
}

// k, v: [T, Hk, D] rows at k_stride / v_stride; caches [blocks, block_size, Hk, D]; slots: [T].
// Grid T, each thread moves 16 bytes. Needs Hk * D % 8 == 0.
template <typename T>
__device__ __forceinline__ void write_kv(const T *__restrict__ k, const T *__restrict__ v, T *__restrict__ k_cache,
                                         T *__restrict__ v_cache, const i64 *__restrict__ slots, int row,
                                         int k_stride, int v_stride) {
    const int t = blockIdx.x;
    const i64 slot = slots[t];
    const uint4 *ks = reinterpret_cast<const uint4 *>(k + (i64)t * k_stride);
    const uint4 *vs = reinterpret_cast<const uint4 *>(v + (i64)t * v_stride);
    uint4 *kd = reinterpret_cast<uint4 *>(k_cache + slot * row);
    uint4 *vd = reinterpret_cast<uint4 *>(v_cache + slot * row);
    for (int i = threadIdx.x; i < row / 8; i += blockDim.x) {
        kd[i] = ks[i];
        vd[i] = vs[i];
    }
}

// The (value, index) of two candidates that wins: the larger value, the lower index on a tie.
__device__ __forceinline__ void argmax_pick(float &best, int &bi, float ov, int oi) {
    if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
}

// The first maximum of row[i0, i1) over the whole block, valid in thread 0 (-inf and INT_MAX when empty).
template <typename T>
__device__ __forceinline__ void block_argmax(const T *__restrict__ row, int i0, int i1, float &best, int &bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
    best = neg_inf();
    bi = 0x7fffffff;
    for (int i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        const float f = to_f(row[i]);
        if (f > best) { best = f; bi = i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        argmax_pick(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (lane == 0) { sv[w] = best; si[w] = bi; }
    __syncthreads();
    if (w == 0) {
        best = lane < nw ? sv[lane] : neg_inf();
        bi = lane < nw ? si[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            argmax_pick(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    }
}

// logits: [T, V] -> out[T] int64, the first index of the row's maximum. One block per row.
template <typename T>
__device__ __forceinline__ void argmax(const T *__restrict__ logits, i64 *__restrict__ out, int V) {
    float best;
    int bi;
    block_argmax(logits + (i64)blockIdx.x * V, 0, V, best, bi);
    if (threadIdx.x == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
}

// Multi-block argmax, pass 1: block (c, t) finds the first maximum of chunk c = [c * chunk, (c + 1) * chunk)
// of row t of logits [T, V] and writes it to pv / pi [T, gridDim.x] (-inf and INT_MAX for an empty chunk).
template <typename T>
__device__ __forceinline__ void argmax_part(const T *__restrict__ logits, float *__restrict__ pv,
                                            int *__restrict__ pi, int V, int chunk) {
    const int i0 = blockIdx.x * chunk;
    float best;
    int bi;
    block_argmax(logits + (i64)blockIdx.y * V, i0, min(V, i0 + chunk), best, bi);
    if (threadIdx.x == 0) {
        pv[(i64)blockIdx.y * gridDim.x + blockIdx.x] = best;
        pi[(i64)blockIdx.y * gridDim.x + blockIdx.x] = bi;
    }
}

// Pass 2: one warp per row t reduces its nb partials (any order gives the same winner: larger value, then
// lower index) -> out[t] int64, 0 for a row with no value above -inf (as torch.argmax of an all -inf row).
__device__ __forceinline__ void argmax_reduce(const float *__restrict__ pv, const int *__restrict__ pi,
                                              i64 *__restrict__ out, int nb) {
    const int t = blockIdx.x, lane = threadIdx.x;
    float best = neg_inf();
    int bi = 0x7fffffff;
    for (int j = lane; j < nb; j += 32) argmax_pick(best, bi, pv[(i64)t * nb + j], pi[(i64)t * nb + j]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        argmax_pick(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (lane == 0) out[t] = bi == 0x7fffffff ? 0 : bi;
}

// The attention output gate (Qwen3.5): y = x * sigmoid(gate), x: [T, H, D] contiguous, gate [T, H, D] at token
// stride gts and head stride ghs (a view into the q projection's output); one thread per 8 values. Needs
// D % 8 == 0 and both strides multiples of 8. xq / xg (not null: one token, H * D % 128 == 0, whole warps): y as
// well in the fixed-point form of the quantised one-token GEMV (fixed_point.cuh), for the o projection.
template <typename T>
__device__ __forceinline__ void sigmoid_mul(const T *__restrict__ x, const T *__restrict__ gate, T *__restrict__ y,
                                            int ntok, int H, int D, int gts, int ghs,
                                            unsigned char *__restrict__ xq = nullptr, int2 *__restrict__ xg = nullptr) {
    const int DV = D / 8;
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const bool valid = idx < (i64)ntok * H * DV;
    if (!valid && xq == nullptr) return;
    float f[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (valid) {
        const i64 t = idx / ((i64)H * DV);
        const int h = (int)(idx / DV % H), j = (int)(idx % DV);
        float g[8];
        unpack8<T>(reinterpret_cast<const uint4 *>(x)[idx], f);
        unpack8<T>(reinterpret_cast<const uint4 *>(gate + t * gts + (i64)h * ghs)[j], g);
#pragma unroll
        for (int i = 0; i < 8; i++) f[i] = to_f(from_f<T>(f[i] / (1.f + expf(-g[i]))));  // as stored
        reinterpret_cast<uint4 *>(y)[idx] = pack8<T>(f);
    }
    if (xq != nullptr) fixed_group16(f, (int)idx, valid, xq, xg, H * D);  // a half warp a group of 128
}

}  // namespace ninfer
