// The gated delta rule token by token (decode, and verify with the state after every position):
// ninfer.reference.gdn.gdn_recurrent / gdn_recurrent_states. Per value head h (key head h / (H / Hk)),
// with q and k L2-normalised (eps inside the rsqrt), q scaled by `scale`, for each token t:
//     S <- exp(g_t) S;   delta = beta_t (v_t - S^T k_t);   S <- S + k_t delta^T;   o_t = S^T q_t
// computed as o_t = S_decayed^T q_t + delta (k_t . q_t), so one reduction over Dk serves both S^T k
// and S^T q. The state is fp32, [H, DK, DV] row-major.
//
// One block of GDN_THREADS per (slice of BV value columns, value head). The block's [DK, BV] state
// slice lives in registers for the whole run: thread (row group rg, column group cg) holds rows
// rg + RG*m (m < R) of 4 consecutive columns, so a warp reads 8 rows x 64 contiguous bytes per load.
// The slice is read once and written once (plus once per token for verify), which is the kernel's
// byte cost; a block reads its whole slice before writing it, so state_out may alias state_in.
#pragma once
#include "common.cuh"

namespace ninfer {

constexpr int GDN_THREADS = 128;
constexpr int GDN_TCHUNK = 16;  // tokens whose q/k/v are staged in shared memory at once

template <typename T, int DK, int DV, int BV>
__device__ __forceinline__ void gdn_recurrent(const T *__restrict__ q, const T *__restrict__ k,
                                              const T *__restrict__ v, const float *__restrict__ g,
                                              const T *__restrict__ beta, const float *state_in,
                                              T *__restrict__ out, float *state_out, float *__restrict__ states,
                                              int ntok, int H, int Hk, int q_stride, int k_stride, int v_stride,
                                              int g_stride, int b_stride, float scale, float eps) {
    constexpr int VEC = 4;                  // columns per thread (one float4)
    constexpr int CG = BV / VEC;            // column groups
    constexpr int RG = GDN_THREADS / CG;    // row groups
    constexpr int R = DK / RG;              // rows per thread
    constexpr int NW = GDN_THREADS / 32;
    static_assert(BV % VEC == 0 && GDN_THREADS % CG == 0 && DK % RG == 0 && DV % BV == 0, "GDN tile shape");
    static_assert(32 % CG == 0, "a warp holds whole row groups");

    __shared__ float qs[GDN_TCHUNK][DK], ks[GDN_TCHUNK][DK];  // raw q, k of the chunk's tokens
    __shared__ float vs[GDN_TCHUNK][BV];
    __shared__ float decay[GDN_TCHUNK], bs[GDN_TCHUNK];
    __shared__ float nq[GDN_TCHUNK], nk[GDN_TCHUNK], kq[GDN_TCHUNK];  // q, k factors; normalised k.q
    __shared__ float red[2][NW][2][BV];  // per-warp partial S^T k, S^T q (double-buffered by token)

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int cg = tid % CG, rg = tid / CG;
    const int h = blockIdx.y, hk = h / (H / Hk);
    const int v0 = blockIdx.x * BV, col = v0 + cg * VEC;

    float s[R][VEC];  // S[rg + RG*m][col + c]
#pragma unroll
    for (int m = 0; m < R; m++) {
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (state_in != nullptr)
            f = *reinterpret_cast<const float4 *>(state_in + ((i64)h * DK + rg + RG * m) * DV + col);
        s[m][0] = f.x, s[m][1] = f.y, s[m][2] = f.z, s[m][3] = f.w;
    }

    for (int t0 = 0; t0 < ntok; t0 += GDN_TCHUNK) {
        const int tc = min(GDN_TCHUNK, ntok - t0);
        __syncthreads();  // the previous chunk's tokens are all done with the staging buffers
        for (int e = tid; e < tc * DK; e += GDN_THREADS) {
            const int t = e / DK, i = e % DK;
            qs[t][i] = to_f(q[(i64)(t0 + t) * q_stride + (i64)hk * DK + i]);
            ks[t][i] = to_f(k[(i64)(t0 + t) * k_stride + (i64)hk * DK + i]);
        }
        for (int e = tid; e < tc * BV; e += GDN_THREADS) {
            const int t = e / BV, j = e % BV;
            vs[t][j] = to_f(v[(i64)(t0 + t) * v_stride + (i64)h * DV + v0 + j]);
        }
        if (tid < tc) {
            decay[tid] = expf(g[(i64)(t0 + tid) * g_stride + h]);
            bs[tid] = to_f(beta[(i64)(t0 + tid) * b_stride + h]);
        }
        __syncthreads();
        // L2 norms and k.q of each token: a warp per token
        for (int t = warp; t < tc; t += NW) {
            float sq = 0.f, sk = 0.f, dot = 0.f;
            for (int i = lane; i < DK; i += 32) {
                const float a = qs[t][i], b = ks[t][i];
                sq = fmaf(a, a, sq), sk = fmaf(b, b, sk), dot = fmaf(a, b, dot);
            }
            sq = warp_sum(sq), sk = warp_sum(sk), dot = warp_sum(dot);
            if (lane == 0) {
                const float fq = rsqrtf(sq + eps) * scale, fk = rsqrtf(sk + eps);
                nq[t] = fq, nk[t] = fk, kq[t] = dot * fq * fk;
            }
        }
        __syncthreads();

        for (int t = 0; t < tc; t++) {
            const int buf = t & 1;
            const float a = decay[t], fq = nq[t], fk = nk[t];
            float kr[R], qr[R];
#pragma unroll
            for (int m = 0; m < R; m++) kr[m] = ks[t][rg + RG * m] * fk, qr[m] = qs[t][rg + RG * m] * fq;
            float pk[VEC], pq[VEC];
#pragma unroll
            for (int c = 0; c < VEC; c++) pk[c] = 0.f, pq[c] = 0.f;
#pragma unroll
            for (int m = 0; m < R; m++) {
#pragma unroll
                for (int c = 0; c < VEC; c++) {
                    s[m][c] *= a;
                    pk[c] = fmaf(s[m][c], kr[m], pk[c]);
                    pq[c] = fmaf(s[m][c], qr[m], pq[c]);
                }
            }
            // sum over the row groups: first the lanes of this warp that share cg, then the warps
#pragma unroll
            for (int off = CG; off < 32; off <<= 1) {
#pragma unroll
                for (int c = 0; c < VEC; c++) {
                    pk[c] += __shfl_xor_sync(0xffffffffu, pk[c], off);
                    pq[c] += __shfl_xor_sync(0xffffffffu, pq[c], off);
                }
            }
            if (lane < CG) {
#pragma unroll
                for (int c = 0; c < VEC; c++) red[buf][warp][0][cg * VEC + c] = pk[c], red[buf][warp][1][cg * VEC + c] = pq[c];
            }
            __syncthreads();
            float delta[VEC], o[VEC];
#pragma unroll
            for (int c = 0; c < VEC; c++) {
                float sk = 0.f, sq = 0.f;
#pragma unroll
                for (int w = 0; w < NW; w++) sk += red[buf][w][0][cg * VEC + c], sq += red[buf][w][1][cg * VEC + c];
                delta[c] = bs[t] * (vs[t][cg * VEC + c] - sk);
                o[c] = fmaf(delta[c], kq[t], sq);
            }
#pragma unroll
            for (int m = 0; m < R; m++) {
#pragma unroll
                for (int c = 0; c < VEC; c++) s[m][c] = fmaf(kr[m], delta[c], s[m][c]);
            }
            if (rg == 0) {
#pragma unroll
                for (int c = 0; c < VEC; c++) out[((i64)(t0 + t) * H + h) * DV + col + c] = from_f<T>(o[c]);
            }
            if (states != nullptr) {  // verify: the state once this token is in
#pragma unroll
                for (int m = 0; m < R; m++)
                    *reinterpret_cast<float4 *>(states + (((i64)(t0 + t) * H + h) * DK + rg + RG * m) * DV + col) =
                        make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
            }
        }
    }
    if (state_out != nullptr) {
#pragma unroll
        for (int m = 0; m < R; m++)
            *reinterpret_cast<float4 *>(state_out + ((i64)h * DK + rg + RG * m) * DV + col) =
                make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
    }
}

}  // namespace ninfer
