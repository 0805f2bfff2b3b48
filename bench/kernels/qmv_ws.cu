// A bench kernel (bench/qmv_ws.py appends this file to ninfer-core's qgemv.cu and compiles the two as one source):
// the one-token int4 GEMV with warp specialisation. One producer warp per block streams the block's share of the
// weight, one contiguous byte range, with the copy engine (cp.async.bulk) into a ring of WS_NS stages of WS_SC
// chunks (8 KB at 16) plus their groups' scales; WS_NCW consumer warps take the chunks of each stage from shared
// memory and multiply them as qmv1 does (the same dequantisation, the same MMAs, the activations from a copy of the
// token in shared memory). No consumer register holds a load in flight, and the loads are large and contiguous.
//
// Work: units of ups consecutive stages (ups divides a tile's stages) dealt to the blocks round robin, so that the
// blocks at any moment read neighbouring units (-DWS_CONTIG=1: each block one contiguous run of the weight instead,
// cut evenly, stream-K). A block that covers a whole tile (16 rows) writes its rows; a tile shared by blocks is
// summed in a float32 workspace (atomics), and the block that brings the tile's stage count to complete writes the
// rows and clears the workspace and count for the next launch.
// Int4, symmetric, groups a multiple of 64 and dividing WS_SC x 64, K a multiple of WS_SC x 64; sm_90+.
#ifndef WS_NCW
#define WS_NCW 8  // consumer warps a block
#endif
#ifndef WS_NS
#define WS_NS 4  // stages in the ring
#endif
#ifndef WS_SC
#define WS_SC 16  // 512-byte chunks a stage
#endif
#ifndef WS_MINB
#define WS_MINB 3  // blocks an SM (launch bounds)
#endif
#ifndef WS_CONTIG  // 1: each block takes one contiguous run of stages; 0: units of ups stages dealt round robin
#define WS_CONTIG 0
#endif
#ifndef WS_DIAG  // 1 (a measurement, results wrong): the consumers only read each chunk's codes from shared memory
#define WS_DIAG 0  // (no dequantisation, no products): the copy engine's streaming rate alone
#endif
#define WS_SSLOT 1024  // bytes a stage's scales may take (groups of 32 bytes, at least 64 k a group)

namespace ninfer {
namespace ws {
__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_fence_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("{\n\t.reg .pred p;\n\tWSW_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
                 "@!p bra WSW_%=;\n\t}" :: "r"(bar), "r"(parity) : "memory");
#endif
}
__device__ __forceinline__ void bulk(unsigned dst, const void *src, unsigned bytes, unsigned bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
#endif
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" :: "n"(WS_NCW * 32) : "memory"); }
}  // namespace ws

// Dynamic shared memory: the ring's codes (WS_NS x WS_SC x 512 B), its scales (WS_NS x WS_SSLOT B), the token (2 K B).
template <typename T, typename ST>
__device__ __forceinline__ void qmv_ws(const uint4 *__restrict__ Wp, const unsigned *__restrict__ Sp,
                                       const T *__restrict__ x, T *__restrict__ y, float *__restrict__ wsum,
                                       int *__restrict__ wcount, int N, int K, int G, int ups) {
    constexpr int NCW = WS_NCW, NS = WS_NS, SC = WS_SC, CHUNK = 64;
    constexpr unsigned WBYTES = SC * 512;
    extern __shared__ __align__(128) unsigned char ws_smem[];
    __shared__ __align__(8) unsigned long long bars[2 * NS + 1];
    __shared__ float red[NCW][16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int spt = K / CHUNK / SC, ng = K / G, gps = SC * CHUNK / G;  // stages a tile, groups a row, groups a stage
    const long long total = (long long)((N + 15) / 16) * spt;
    const long long s0 = (long long)blockIdx.x * total / gridDim.x;
    const long long units = total / ups;
    const int nst = WS_CONTIG ? (int)((long long)(blockIdx.x + 1) * total / gridDim.x - s0)
                              : (blockIdx.x < units ? (int)((units - 1 - blockIdx.x) / gridDim.x + 1) * ups : 0);
    auto stage = [&](int s) -> long long {  // the block's s-th stage in the weight
        return WS_CONTIG ? s0 + s : ((long long)blockIdx.x + (long long)(s / ups) * gridDim.x) * ups + s % ups;
    };
    const unsigned ring_w = ws::smem_addr(ws_smem), ring_s = ring_w + NS * WBYTES, xs = ring_s + NS * WS_SSLOT;
    const unsigned full0 = ws::smem_addr(bars), empty0 = full0 + NS * 8, xbar = full0 + 2 * NS * 8;
    if (threadIdx.x == 0) {
        for (int i = 0; i < NS; i++) {
            ws::mbar_init(full0 + 8 * i, 1);
            ws::mbar_init(empty0 + 8 * i, NCW);
        }
        ws::mbar_init(xbar, 1);
        ws::mbar_fence_init();
    }
    __syncthreads();
    if (warp == NCW) {  // the producer
        if (lane == 0) {
            const unsigned sbytes = (unsigned)gps * 32;
            for (int s = 0; s < nst; s++) {
                const int slot = s % NS;
                if (s >= NS) ws::mbar_wait(empty0 + 8 * slot, ((s / NS) - 1) & 1);
                const long long gs = stage(s), tile = gs / spt;
                const int st = (int)(gs - tile * spt);
                ws::mbar_expect(full0 + 8 * slot, WBYTES + sbytes);
                ws::bulk(ring_w + slot * WBYTES, Wp + gs * (SC * 32), WBYTES, full0 + 8 * slot);
                ws::bulk(ring_s + slot * WS_SSLOT, Sp + (tile * ng + (long long)st * gps) * 8, sbytes, full0 + 8 * slot);
                if (s == NS - 1 || s == nst - 1 && nst < NS) {  // the first stages asked for: now wait for the token
                    pdl_stream_enter();
                    ws::mbar_expect(xbar, (unsigned)K * 2);
                    ws::bulk(xs, x, (unsigned)K * 2, xbar);
                }
            }
            if (nst == 0) pdl_stream_enter();
        }
        return;
    }
    const int g = lane >> 2, t = lane & 3;
    float acc0 = 0.f, acc2 = 0.f;
    long long cur = -1;
    int mine = 0;
    auto flush = [&]() {
        if (t == 0) {
            red[warp][g] = acc0;
            red[warp][g + 8] = acc2;
        }
        ws::consumers_sync();
        if (warp == 0) {
            float v = 0.f;
            if (lane < 16) {
#pragma unroll
                for (int w = 0; w < NCW; w++) v += red[w][lane];
            }
            const long long row = cur * 16 + (lane & 15);
            if (mine == spt) {
                if (lane < 16 && row < N) y[row] = from_f<T>(v);
            } else {
                if (lane < 16) atomicAdd(wsum + row, v);
                __threadfence();
                __syncwarp();
                int last = 0;
                if (lane == 0) last = atomicAdd(wcount + cur, mine) + mine == spt;
                if (__shfl_sync(~0u, last, 0)) {
                    __threadfence();
                    if (lane < 16) {
                        const float all = atomicExch(wsum + row, 0.f);
                        if (row < N) y[row] = from_f<T>(all);
                    }
                    if (lane == 0) atomicExch(wcount + cur, 0);
                }
            }
        }
        ws::consumers_sync();
    };
    ws::mbar_wait(xbar, 0);
    for (int s = 0; s < nst; s++) {
        const int slot = s % NS;
        const long long gs = stage(s), tile = gs / spt;
        const int st = (int)(gs - tile * spt);
        if (tile != cur) {
            if (cur >= 0) flush();
            cur = tile;
            mine = 0;
            acc0 = acc2 = 0.f;
        }
        mine++;
        ws::mbar_wait(full0 + 8 * slot, (s / NS) & 1);
#pragma unroll
        for (int j = 0; j < SC / NCW; j++) {
            const int cl = warp + NCW * j, c = st * SC + cl;  // the chunk in the stage, in the tile
            const uint4 wv = qm_lds16(ring_w + slot * WBYTES + (cl * 32 + lane) * 16);
            const unsigned sw = qm_lds4(ring_s + slot * WS_SSLOT + ((cl * CHUNK / G) * 8 + g) * 4);
            const uint4 xv0 = qm_lds16(xs + (c * CHUNK + 8 * t) * 2), xv1 = qm_lds16(xs + (c * CHUNK + 8 * t + 32) * 2);
            if (WS_DIAG) {
                acc0 += __uint_as_float(((wv.x ^ wv.y ^ wv.z ^ wv.w ^ sw) & 0x007FFFFFu) | 0x3F800000u);
                continue;
            }
            const unsigned words[4] = {wv.x, wv.y, wv.z, wv.w};
            float tmp[4] = {0.f, 0.f, 0.f, 0.f};
            QmDeq<T, 4> dq;
            dq.init(0x0808u);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint4 xv = h ? xv1 : xv0;
                const unsigned xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                for (int s2 = 0; s2 < 2; s2++) {
                    unsigned a[4];
                    dq.step(words + 2 * h + s2, a);
                    qm_mma(tmp, a, xw[2 * s2], xw[2 * s2 + 1], (const T *)nullptr);
                }
            }
            acc0 = fmaf(qm_scale(sw & 0xFFFFu, (const ST *)nullptr), tmp[0], acc0);
            acc2 = fmaf(qm_scale_hi(sw, (const ST *)nullptr), tmp[2], acc2);
        }
        __syncwarp();
        if (lane == 0) ws::mbar_arrive(empty0 + 8 * slot);
    }
    if (cur >= 0) flush();
}
}  // namespace ninfer

#define QMV_WS_KERNEL(S, T, SS, ST)                                                                            \
    extern "C" __global__ void __launch_bounds__((WS_NCW + 1) * 32, WS_MINB) qmvws_##S##_s##SS##_b4_sym(          \
        const uint4 *Wp, const unsigned *Sp, const T *x, T *y, float *wsum, int *wcount, int N, int K, int G,    \
        int ups) {                                                                                            \
        ninfer::qmv_ws<T, ST>(Wp, Sp, x, y, wsum, wcount, N, K, G, ups);                                      \
    }
QMV_WS_KERNEL(bf16, __nv_bfloat16, f16, __half)
QMV_WS_KERNEL(f16, __half, f16, __half)
