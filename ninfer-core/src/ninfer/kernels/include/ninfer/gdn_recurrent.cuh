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
#include "fixed_point.cuh"
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

namespace ninfer {

// The decode/verify core of a Gated DeltaNet layer in one launch: the gated delta rule above, then the
// layer's output norm, y_t = rms_norm(o_t) * w * silu(z_t) over the head's DV values (o_t rounded to T first,
// as the two separate ops compute it: ninfer.reference.gdn.gdn_recurrent_gated).
//
// One block of GDN_HEAD_THREADS per value head holds the head's whole [DK, DV] state in registers: warp w is
// row group w (rows w + NW m, m < R), lane l holds columns 4 l .. 4 l + 3, so warp 0 ends every token with all
// DV outputs of the head and normalises them with warp shuffles alone. The sums over the row groups meet in
// shared memory in a fixed order (warp 0, 1, ...) that depends on nothing but the shape: a T-token verify call
// computes, token for token, the bits of T decode calls. xq / xg (not null: one token, DV = 128): the output row
// as well in the fixed-point form of the quantised one-token GEMV (fixed_point.cuh), for the output projection. The head's state is read once and written once (plus
// once per token for verify); a block reads it before writing it, so state_out may alias state_in. The kernel's PDL
// wait (pdl_enter) is made here, after the norm weight's loads (NINFER_W_EARLY, common.cuh).
constexpr int GDN_HEAD_THREADS = 512;
constexpr int GDN_HEAD_TCHUNK = 8;

template <typename T, int DK, int DV>
__device__ __forceinline__ void gdn_recurrent_gated(
    const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, const float *__restrict__ g,
    const T *__restrict__ beta, const float *state_in, const T *__restrict__ z, const T *__restrict__ norm_w,
    T *__restrict__ out, float *state_out, float *__restrict__ states, int ntok, int H, int Hk, int q_stride,
    int k_stride, int v_stride, int g_stride, int b_stride, int z_stride, float scale, float eps,
    float norm_eps, unsigned char *__restrict__ xq = nullptr, int2 *__restrict__ xg = nullptr) {
    constexpr int VEC = 4;                       // columns per thread
    constexpr int NW = GDN_HEAD_THREADS / 32;    // warps = row groups
    constexpr int R = DK / NW;                   // rows per thread
    constexpr int TC = GDN_HEAD_TCHUNK;
    static_assert(DV == 32 * VEC && DK % NW == 0, "a warp spans the head's DV columns");

    __shared__ float qs[TC][DK], ks[TC][DK], vs[TC][DV];
    __shared__ float decay[TC], bs[TC], nq[TC], nk[TC], kq[TC];
    __shared__ float red[NW][2][DV];  // per-warp partial S^T k, S^T q
    __shared__ float sums[2][DV];     // their sums over the warps

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int h = blockIdx.x, hk = h / (H / Hk);
    const int col = lane * VEC;

    float wn[VEC];  // the norm's weights of this lane's columns (NINFER_W_EARLY: before the PDL wait)
    if (NINFER_W_EARLY) {
#pragma unroll
        for (int c = 0; c < VEC; c++) wn[c] = to_f(norm_w[col + c]);
    }
    pdl_enter();
    float s[R][VEC];  // S[warp + NW m][col + c]
#pragma unroll
    for (int m = 0; m < R; m++) {
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (state_in != nullptr)
            f = *reinterpret_cast<const float4 *>(state_in + ((i64)h * DK + warp + NW * m) * DV + col);
        s[m][0] = f.x, s[m][1] = f.y, s[m][2] = f.z, s[m][3] = f.w;
    }
    if (!NINFER_W_EARLY) {
#pragma unroll
        for (int c = 0; c < VEC; c++) wn[c] = to_f(norm_w[col + c]);
    }

    for (int t0 = 0; t0 < ntok; t0 += TC) {
        const int tc = min(TC, ntok - t0);
        __syncthreads();  // the previous chunk's tokens are all done with the staging buffers
        for (int e = tid; e < tc * DK; e += GDN_HEAD_THREADS) {
            const int t = e / DK, i = e % DK;
            qs[t][i] = to_f(q[(i64)(t0 + t) * q_stride + (i64)hk * DK + i]);
            ks[t][i] = to_f(k[(i64)(t0 + t) * k_stride + (i64)hk * DK + i]);
        }
        for (int e = tid; e < tc * DV; e += GDN_HEAD_THREADS) {
            const int t = e / DV, j = e % DV;
            vs[t][j] = to_f(v[(i64)(t0 + t) * v_stride + (i64)h * DV + j]);
        }
        if (tid < tc) {
            decay[tid] = expf(g[(i64)(t0 + tid) * g_stride + h]);
            bs[tid] = to_f(beta[(i64)(t0 + tid) * b_stride + h]);
        }
        __syncthreads();
        for (int t = warp; t < tc; t += NW) {  // L2 norms and k.q of each token: a warp per token
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
            const float a = decay[t], fq = nq[t], fk = nk[t];
            float pk[VEC], pq[VEC], kr[R];
#pragma unroll
            for (int c = 0; c < VEC; c++) pk[c] = 0.f, pq[c] = 0.f;
#pragma unroll
            for (int m = 0; m < R; m++) {
                kr[m] = ks[t][warp + NW * m] * fk;
                const float qr = qs[t][warp + NW * m] * fq;
#pragma unroll
                for (int c = 0; c < VEC; c++) {
                    s[m][c] *= a;
                    pk[c] = fmaf(s[m][c], kr[m], pk[c]);
                    pq[c] = fmaf(s[m][c], qr, pq[c]);
                }
            }
            *reinterpret_cast<float4 *>(&red[warp][0][col]) = make_float4(pk[0], pk[1], pk[2], pk[3]);
            *reinterpret_cast<float4 *>(&red[warp][1][col]) = make_float4(pq[0], pq[1], pq[2], pq[3]);
            __syncthreads();
            if (tid < 2 * DV) {  // one (column, k or q) sum a thread, warps in order
                const int which = tid / DV, j = tid % DV;
                float acc = 0.f;
#pragma unroll
                for (int w = 0; w < NW; w++) acc += red[w][which][j];
                sums[which][j] = acc;
            }
            __syncthreads();
            float delta[VEC], o[VEC];
#pragma unroll
            for (int c = 0; c < VEC; c++) {
                delta[c] = bs[t] * (vs[t][col + c] - sums[0][col + c]);
                o[c] = fmaf(delta[c], kq[t], sums[1][col + c]);
            }
#pragma unroll
            for (int m = 0; m < R; m++) {
#pragma unroll
                for (int c = 0; c < VEC; c++) s[m][c] = fmaf(kr[m], delta[c], s[m][c]);
            }
            if (warp == 0) {  // the gated RMSNorm of the head's DV outputs, all in this warp
                float ss = 0.f;
#pragma unroll
                for (int c = 0; c < VEC; c++) {
                    o[c] = to_f(from_f<T>(o[c]));  // the recurrence's output in T, as the norm op reads it
                    ss = fmaf(o[c], o[c], ss);
                }
                ss = warp_sum(ss);
                const float r = rsqrtf(ss / (float)DV + norm_eps);
                const T *zr = z + (i64)(t0 + t) * z_stride + (i64)h * DV + col;
                T *orow = out + ((i64)(t0 + t) * H + h) * DV + col;
                float yv[VEC];
#pragma unroll
                for (int c = 0; c < VEC; c++) {
                    const float zz = to_f(zr[c]);
                    const T y = from_f<T>(o[c] * r * wn[c] * (zz / (1.f + expf(-zz))));
                    orow[c] = y;
                    yv[c] = to_f(y);
                }
                if (xq != nullptr) fixed_group32(yv, h, xq, xg, H * DV);  // one token: the head is a group of 128
            }
            if (states != nullptr) {  // verify: the state once this token is in
#pragma unroll
                for (int m = 0; m < R; m++)
                    *reinterpret_cast<float4 *>(states + (((i64)(t0 + t) * H + h) * DK + warp + NW * m) * DV + col) =
                        make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
            }
        }
    }
    if (state_out != nullptr) {
#pragma unroll
        for (int m = 0; m < R; m++)
            *reinterpret_cast<float4 *>(state_out + ((i64)h * DK + warp + NW * m) * DV + col) =
                make_float4(s[m][0], s[m][1], s[m][2], s[m][3]);
    }
}

}  // namespace ninfer
