// One-token bf16 GEMV structures for a sweep (bench/gemv_lab.py), not a backend kernel: y[n] = W[n] . x.
// Each warp owns R rows (adjacent, or STRIDED: n, n + N/R, ... as the SwiGLU GEMV pairs gate and up rows), and a
// 1/SPLIT share of K; per round a lane issues U 16-byte loads for each of its R rows (R x U loads in flight), and
// the activation vector it needs is read once per round for all R rows. PRE: the first round's weights are loaded
// into registers before griddepcontrol.wait (weights are constants), not only asked of L2 as the backend does.
// The launcher (gemv_lab.py) appends the instantiations it sweeps.
#define NINFER_L2_PREFETCH_256B
#include <ninfer/common.cuh>

namespace lab {
using namespace ninfer;
typedef __nv_bfloat16 T;

// U consecutive 512-byte pieces of a row (lane's 16 bytes of each) in one asm statement (M == 1).
template <int U>
__device__ __forceinline__ void load_round(const uint4 *p, uint4 (&w)[U]) {
    if constexpr (U == 2) {
        asm volatile(
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%8];\n\t"
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%4,%5,%6,%7}, [%8+512];"
            : "=r"(w[0].x), "=r"(w[0].y), "=r"(w[0].z), "=r"(w[0].w), "=r"(w[1].x), "=r"(w[1].y), "=r"(w[1].z),
              "=r"(w[1].w)
            : "l"(p));
    } else if constexpr (U == 4) {
        asm volatile(
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%16];\n\t"
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%4,%5,%6,%7}, [%16+512];\n\t"
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%8,%9,%10,%11}, [%16+1024];\n\t"
            "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%12,%13,%14,%15}, [%16+1536];"
            : "=r"(w[0].x), "=r"(w[0].y), "=r"(w[0].z), "=r"(w[0].w), "=r"(w[1].x), "=r"(w[1].y), "=r"(w[1].z),
              "=r"(w[1].w), "=r"(w[2].x), "=r"(w[2].y), "=r"(w[2].z), "=r"(w[2].w), "=r"(w[3].x), "=r"(w[3].y),
              "=r"(w[3].z), "=r"(w[3].w)
            : "l"(p));
    } else {
#pragma unroll
        for (int u = 0; u < U; u++) w[u] = load_stream(p + 32 * u);
    }
}

// M: how a round's loads are written. 0: one load_stream each (the backend's form); 1: one asm statement a row;
// 2: the next round loaded into a second register set before this round is used; 3: as 0, with one accumulator
// per load of a round (U independent FMA chains instead of one).
template <int R, int U, int SPLIT, int WARPS, bool STRIDED, bool PRE, int M>
__device__ __forceinline__ void gemv_lab(const T *__restrict__ W, const T *__restrict__ x, T *__restrict__ y, int N,
                                         int K) {
    constexpr int GROUPS = WARPS / SPLIT;  // row groups per block
    __shared__ float s_acc[WARPS][R];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int grp = warp / SPLIT, part = warp % SPLIT;
    const int NG = N / R;  // row groups (N % R == 0)
    const int gi = blockIdx.x * GROUPS + grp;
    const bool live = gi < NG;
    const int KV = K / 8;
    const int per = (KV + SPLIT - 1) / SPLIT;
    const int v0 = part * per, v1 = min(KV, v0 + per);
    const uint4 *Wr[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int n = live ? (STRIDED ? gi + r * NG : gi * R + r) : 0;
        Wr[r] = reinterpret_cast<const uint4 *>(W + (i64)n * K);
    }
    const uint4 *xr = reinterpret_cast<const uint4 *>(x);
    int v = v0 + lane;
    uint4 w[R][U];
    bool have = false;
    if (live && v + 32 * (U - 1) < v1) {
        if (PRE) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int u = 0; u < U; u++) w[r][u] = load_stream(Wr[r] + v + 32 * u);
            have = true;
        } else {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int u = 0; u < U; u++) prefetch_l2(Wr[r] + v + 32 * u);
        }
    }
    pdl_stream_enter();
    float acc[R], accu[R][U];
#pragma unroll
    for (int r = 0; r < R; r++) {
        acc[r] = 0.f;
#pragma unroll
        for (int u = 0; u < U; u++) accu[r][u] = 0.f;
    }
    if (live && M == 2) {
        if (!have && v + 32 * (U - 1) < v1) {
#pragma unroll
            for (int r = 0; r < R; r++) load_round<U>(Wr[r] + v, w[r]);
        }
        for (; v + 32 * (U - 1) < v1; v += 32 * U) {
            uint4 nx[R][U];
            const bool more = v + 32 * U + 32 * (U - 1) < v1;
            if (more) {
#pragma unroll
                for (int r = 0; r < R; r++) load_round<U>(Wr[r] + v + 32 * U, nx[r]);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                float xf[8];
                unpack8<T>(__ldg(xr + v + 32 * u), xf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    unpack8<T>(w[r][u], wf);
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[r] = fmaf(wf[i], xf[i], acc[r]);
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int u = 0; u < U; u++) w[r][u] = nx[r][u];
        }
    }
    if (live) {
        for (; v + 32 * (U - 1) < v1; v += 32 * U) {
            if (!have) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (M == 1) {
                        load_round<U>(Wr[r] + v, w[r]);
                    } else {
#pragma unroll
                        for (int u = 0; u < U; u++) w[r][u] = load_stream(Wr[r] + v + 32 * u);
                    }
                }
            }
            have = false;
#pragma unroll
            for (int u = 0; u < U; u++) {
                float xf[8];
                unpack8<T>(__ldg(xr + v + 32 * u), xf);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[8];
                    unpack8<T>(w[r][u], wf);
                    if (M == 3) {  // one accumulator per load of the round: U independent chains
#pragma unroll
                        for (int i = 0; i < 8; i++) accu[r][u] = fmaf(wf[i], xf[i], accu[r][u]);
                    } else {
#pragma unroll
                        for (int i = 0; i < 8; i++) acc[r] = fmaf(wf[i], xf[i], acc[r]);
                    }
                }
            }
        }
        if (M == 3) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int u = 0; u < U; u++) acc[r] += accu[r][u];
        }
        for (; v < v1; v += 32) {
            float xf[8];
            unpack8<T>(__ldg(xr + v), xf);
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wf[8];
                unpack8<T>(load_stream(Wr[r] + v), wf);
#pragma unroll
                for (int i = 0; i < 8; i++) acc[r] = fmaf(wf[i], xf[i], acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
    if (SPLIT == 1) {
        if (live && lane < R) {
#pragma unroll
            for (int r = 0; r < R; r++)
                if (lane == r) y[STRIDED ? gi + r * NG : gi * R + r] = from_f<T>(acc[r]);
        }
        return;
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; r++) s_acc[warp][r] = acc[r];
    }
    __syncthreads();
    if (live && part == 0 && lane < R) {
#pragma unroll
        for (int r = 0; r < R; r++)
            if (lane == r) {
                float s = 0.f;
#pragma unroll
                for (int p = 0; p < SPLIT; p++) s += s_acc[warp + p][r];
                y[STRIDED ? gi + r * NG : gi * R + r] = from_f<T>(s);
            }
    }
}

}  // namespace lab

#define LAB(R, U, S, WARPS, ST, PRE, M)                                                                        \
    extern "C" __global__ void __launch_bounds__(WARPS * 32)                                                   \
        lab_r##R##_u##U##_s##S##_w##WARPS##_st##ST##_pre##PRE##_m##M(const lab::T *W, const lab::T *x,         \
                                                                      lab::T *y, int N, int K) {              \
        lab::gemv_lab<R, U, S, WARPS, ST, PRE, M>(W, x, y, N, K);                                               \
    }
