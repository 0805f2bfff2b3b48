"""The Gated DeltaNet kernels' CUDA source, run on the CPU: the device code of conv1d_update.cuh,
gdn_recurrent.cuh and gdn_chunked.cuh is compiled with the host C++ compiler against a small shim (each CUDA thread a
std::thread, __syncthreads a barrier, warp shuffles through a per-warp exchange), and driven through the
real launchers of ninfer.kernels.gdn (their tensors posing as CUDA tensors, the module replaced by the
shim). Checks the index math, the chunking over tokens, the head grouping and the launch arguments
against the reference ops without a GPU; tests/gpu/test_gdn_kernels.py checks the compiled kernels. Also the
fixed-point form a one-token GEMV makes per burst from its row (fixed_point.cuh fixed_burst, qgemv.cu qmv1x)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ninfer.kernels import gdn as launchers
from ninfer.kernels.nvrtc import CORE_INCLUDE
from ninfer.reference import gdn as ref

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backends" / "ninfer-sm90" / "src"))

SHIM = r"""
#pragma once
#include <algorithm>
#include <cmath>
struct dim3e { int x = 0, y = 0, z = 0; };
extern thread_local dim3e threadIdx, blockIdx;
extern dim3e blockDim, gridDim;
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
using std::min;
struct alignas(16) float4 { float x, y, z, w; };
struct uint2 { unsigned x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
void __syncthreads();
float __shfl_xor_sync(unsigned, float, int);
namespace ninfer {
typedef long long i64;
inline float to_f(float x) { return x; }
template <typename T> T from_f(float);
template <> inline float from_f<float>(float x) { return x; }
inline float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o); return v; }
inline void pdl_enter() {}  // the PDL wait: nothing runs before a host launch
}
#define NINFER_W_EARLY 1  // common.cuh's default
// gdn_chunked_mma.cuh: float2, bit casts, a host bf16, and the device instructions (mma_tf32 in the driver)
#include <cstring>
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
struct hbf16 { unsigned short b; };
#define NINFER_GDN_MMA_HOST
namespace ninfer {
inline float to_f(hbf16 x) { return __uint_as_float((unsigned)x.b << 16); }
template <> inline hbf16 from_f<hbf16>(float x) {
    unsigned u = __float_as_uint(x);
    return {(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline unsigned tf32_rna(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
inline void tf32_split(float x, unsigned &hi, unsigned &lo) { hi = tf32_rna(x); lo = tf32_rna(x - __uint_as_float(hi)); }
void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
inline void gdn_cp16(void *dst, const void *src, int sz) { if (sz) std::memcpy(dst, src, 16); else std::memset(dst, 0, 16); }
inline void gdn_cp_commit() {}
inline void gdn_cp_wait_all() {}
}
// fixed_point.cuh (the fixed-point form the gated kernel writes for a quantised out_proj): a float division and the
// conversion to int as the device rounds them (to nearest, ties to even: the default rounding mode), int shuffles
struct int2 { int x, y; };
inline int2 make_int2(int a, int b) { return {a, b}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
int __shfl_xor_sync(unsigned, int, int);
using std::max;
// fixed_point.cuh's fixed_burst (qgemv.cu qmv1x): 16-byte loads, byte permutes, the reciprocal
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 __ldg(const uint4 *p) { return *p; }
inline uint2 __ldg(const uint2 *p) { return *p; }
inline float __frcp_rn(float x) { return 1.f / x; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {  // byte i of the result: byte (s >> 4 i) & 7 of y:x
    const unsigned long long xy = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(xy >> 8 * ((s >> 4 * i) & 7) & 0xFF) << 8 * i;
    return r;
}
"""

DRIVER = r"""
#include "common.cuh"
#include "conv1d_update.cuh"
#include "gdn_recurrent.cuh"
#include "gdn_chunked.cuh"
#include "gdn_chunked_mma.cuh"
#include <barrier>
#include <functional>
#include <thread>
#include <vector>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
static std::barrier<> *block_bar;
static std::vector<std::barrier<> *> warp_bar;
static float slots[32][32];
void __syncthreads() { block_bar->arrive_and_wait(); }
float __shfl_xor_sync(unsigned, float v, int off) {
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    slots[w][l] = v;
    warp_bar[w]->arrive_and_wait();
    float r = slots[w][l ^ off];
    warp_bar[w]->arrive_and_wait();
    return r;
}
int __shfl_xor_sync(unsigned m, int v, int off) {
    float f;
    std::memcpy(&f, &v, 4);
    f = __shfl_xor_sync(m, f, off);
    std::memcpy(&v, &f, 4);
    return v;
}
// the blocks run one after another (their __shared__ arrays are statics); a block's threads run together
static void launch(int gx, int gy, int threads, std::function<void()> f) {
    blockDim = {threads, 1, 1};
    std::barrier<> bar(threads);
    block_bar = &bar;
    std::vector<std::barrier<> *> warps;
    for (int w = 0; w < threads / 32; w++) warps.push_back(new std::barrier<>(32));
    warp_bar = warps;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++)
        pool.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (int by = 0; by < gy; by++)
                for (int bx = 0; bx < gx; bx++) {
                    blockIdx = {bx, by, 0};
                    f();
                    bar.arrive_and_wait();
                }
        });
    for (auto &p : pool) p.join();
    for (auto *w : warps) delete w;
}
extern "C" void causal_conv1d_update_f32_k4(int gx, int gy, int threads, const float *x, const float *w,
        const float *b, const float *si, float *y, float *so, int T, int C, int xs) {
    launch(gx, gy, threads, [=] { ninfer::causal_conv1d_update<float, 4>(x, w, b, si, y, so, T, C, xs); });
}
extern "C" void gdn_recurrent_f32_d128(int gx, int gy, int threads, const float *q, const float *k,
        const float *v, const float *g, const float *beta, const float *si, float *out, float *so, float *states,
        int T, int H, int Hk, int qs, int ks, int vs, int gs, int bs, float scale, float eps) {
    launch(gx, gy, threads, [=] {
        ninfer::gdn_recurrent<float, 128, 128, 16>(q, k, v, g, beta, si, out, so, states, T, H, Hk, qs, ks, vs,
                                                   gs, bs, scale, eps);
    });
}
extern "C" void gdn_recurrent_gated_f32_d128(int gx, int gy, int threads, const float *q, const float *k,
        const float *v, const float *g, const float *beta, const float *si, const float *z, const float *nw,
        float *out, float *so, float *states, int T, int H, int Hk, int qs, int ks, int vs, int gs, int bs, int zs,
        float scale, float eps, float neps, unsigned char *xq, int2 *xg) {
    launch(gx, gy, threads, [=] {
        ninfer::gdn_recurrent_gated<float, 128, 128>(q, k, v, g, beta, si, z, nw, out, so, states, T, H, Hk, qs, ks,
                                                     vs, gs, bs, zs, scale, eps, neps, xq, xg);
    });
}
extern "C" void causal_conv1d_prefill_f32_k4(int gx, int gy, int threads, const float *x, const float *w,
        const float *b, const float *si, float *y, float *so, int T, int C, int xs) {
    launch(gx, gy, threads, [=] { ninfer::causal_conv1d_prefill<float, 4>(x, w, b, si, y, so, T, C, xs); });
}
// One warp makes a bf16 row's fixed-point form burst by burst with fixed_burst (KB values a burst, as qmv1x's warps
// do) and writes it out as the norm writes the row's: planes [2, K] in k order, xg a group.
extern "C" void fixed_burst_bf16(int kb, const hbf16 *x, int K, unsigned char *xq, int2 *xg) {
    alignas(16) static unsigned buf[128];
    launch(1, 1, 32, [=] {
        const int lane = threadIdx.x % 32, lpg = 4096 / kb;
        for (int b = 0; b < K / kb; b++) {
            float sx;
            int qs;
            if (kb == 256) ninfer::fixed_burst<hbf16, 256>(x + b * kb, buf, lane, sx, qs);
            else ninfer::fixed_burst<hbf16, 128>(x + b * kb, buf, lane, sx, qs);
            __syncthreads();
            if (lane == 0) {
                std::memcpy(xq + b * kb, buf, kb);
                std::memcpy(xq + K + b * kb, reinterpret_cast<unsigned char *>(buf) + kb, kb);
            }
            if (lane % lpg == 0) xg[b * kb / 128 + lane / lpg] = make_int2(__float_as_int(sx), qs);
            __syncthreads();
        }
    });
}
alignas(16) static unsigned char prep_smem[160 * 1024];
extern "C" void gdn_chunk_prep_f32_d128(int gx, int gy, int threads, const float *q, const float *k, const float *v,
        const float *g, const float *beta, float *W, float *U, float *Aqk, float *G, float *rq, float *rk, int T, int H,
        int Hk, int qs, int ks, int vs, int gs, int bs, float scale, float eps) {
    gridDim = {gx, gy, 1};
    launch(gx, gy, threads, [=] {
        ninfer::gdn_chunk_prep<float, 128>(prep_smem, q, k, v, g, beta, W, U, Aqk, G, rq, rk, T, H, Hk, qs, ks, vs,
                                           gs, bs, scale, eps);
    });
}
#define CHUNK_STATE(BV)                                                                                        \
    extern "C" void gdn_chunk_state_f32_d128_v##BV(int gx, int gy, int threads, const float *q, const float *k,  \
            const float *W, const float *U, const float *Aqk, const float *G, const float *rq, const float *rk,  \
            const float *si, float *out, float *so, int T, int H, int Hk, int qs, int ks, int NC) {              \
        launch(gx, gy, threads, [=] {                                                                           \
            ninfer::gdn_chunk_state<float, 128, BV>(q, k, W, U, Aqk, G, rq, rk, si, out, so, T, H, Hk, qs, ks, NC); \
        });                                                                                                     \
    }
CHUNK_STATE(16)
CHUNK_STATE(32)
// mma.sync m16n8k8 TF32 of one warp as the PTX ISA lays out its fragments (g = lane / 4, t4 = lane % 4): A row
// g (+8 in a1, a3) at k = t4 (+4 in a2, a3); B column g at k = t4 (+4 in b1); D rows g / g+8, columns 2 t4 (+1).
// Each lane posts its fragments, then computes its own D from everyone's (operands cut to TF32, as the hardware).
static float mma_slots[8][32][6];
void ninfer::mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t4 = l % 4;
    for (int i = 0; i < 4; i++) mma_slots[w][l][i] = __uint_as_float(a[i] & 0xffffe000u);
    mma_slots[w][l][4] = __uint_as_float(b0 & 0xffffe000u);
    mma_slots[w][l][5] = __uint_as_float(b1 & 0xffffe000u);
    warp_bar[w]->arrive_and_wait();
    for (int i = 0; i < 4; i++) {
        const int r = g + 8 * (i / 2), n = 2 * t4 + i % 2;
        double acc = 0;
        for (int kk = 0; kk < 8; kk++)
            acc += (double)mma_slots[w][(r % 8) * 4 + kk % 4][(r >= 8) + 2 * (kk >= 4)] *
                   mma_slots[w][n * 4 + kk % 4][4 + (kk >= 4)];
        d[i] += (float)acc;
    }
    warp_bar[w]->arrive_and_wait();
}
alignas(16) static unsigned char mma_smem[ninfer::gdn_mma_smem_bytes()];
extern "C" void gdn_chunk_prep_bf16_d128(int gx, int gy, int threads, const hbf16 *q, const hbf16 *k, const hbf16 *v,
        const float *g, const hbf16 *beta, float *W, float *U, float *Aqk, float *G, float *rq, float *rk, int T, int H,
        int Hk, int qs, int ks, int vs, int gs, int bs, float scale, float eps) {
    gridDim = {gx, gy, 1};
    launch(gx, gy, threads, [=] {
        ninfer::gdn_chunk_prep<hbf16, 128>(prep_smem, q, k, v, g, beta, W, U, Aqk, G, rq, rk, T, H, Hk, qs, ks, vs,
                                           gs, bs, scale, eps);
    });
}
extern "C" void gdn_chunk_state_mma_bf16_d128(int gx, int gy, int threads, const hbf16 *q, const hbf16 *k,
        const float *W, const float *U, const float *Aqk, const float *G, const float *rq, const float *rk,
        const float *si, hbf16 *out, float *so, int T, int H, int Hk, int qs, int ks, int NC) {
    gridDim = {gx, gy, 1};
    launch(gx, gy, threads, [=] {
        ninfer::gdn_chunk_state_mma<hbf16>(mma_smem, q, k, W, U, Aqk, G, rq, rk, si, out, so, T, H, Hk, qs, ks, NC);
    });
}
"""


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("needs a host C++20 compiler (g++) to run the kernel source on the CPU")
    d = tmp_path_factory.mktemp("gdn_host")
    for name in ("conv1d_update.cuh", "gdn_recurrent.cuh", "gdn_chunked.cuh", "gdn_chunked_mma.cuh", "fixed_point.cuh"):
        shutil.copy(CORE_INCLUDE / "ninfer" / name, d / name)
    (d / "common.cuh").write_text(SHIM)
    (d / "driver.cpp").write_text(DRIVER)
    res = subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-o", str(d / "k.so"), str(d / "driver.cpp"),
                          "-lpthread"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(d / "k.so"))


class _PosingAsCuda(torch.Tensor):
    @property
    def is_cuda(self):
        return True


def cuda_like(t):
    return None if t is None else torch.Tensor._make_subclass(_PosingAsCuda, t)


class _HostModule:
    """Stands in for a loaded cubin: launches go to the host build, with the grid the launcher chose."""

    def __init__(self, lib):
        self.lib = lib
        self.launched: list[str] = []

    def __getitem__(self, name):
        fn = getattr(self.lib, name)
        self.launched.append(name)

        def launch(grid, block, *args, smem=0):
            c = []
            for a in args:
                if isinstance(a, torch.Tensor) or a is None:
                    c.append(ctypes.c_void_p(0 if a is None else a.data_ptr()))
                else:
                    c.append(ctypes.c_int(a) if isinstance(a, int) else ctypes.c_float(a))
            gx, gy = (tuple(grid) + (1,))[:2]
            fn(gx, gy, block[0], *c)
        launch.set_max_dynamic_smem = lambda nbytes: None
        return launch


@pytest.fixture
def ops(host_kernels, monkeypatch):
    import ninfer_sm90

    module = _HostModule(host_kernels)
    monkeypatch.setattr(ninfer_sm90.LIBRARY, "module", lambda device=None: module)

    class NoFallback:
        def __getattr__(self, op):
            raise AssertionError(f"{op} fell back to the reference: the kernel did not run")

    monkeypatch.setattr(launchers, "ref", NoFallback())
    monkeypatch.setattr(launchers, "smem_optin", lambda device_index: 227 * 1024)  # the H200's
    ops = launchers.make_gdn_ops(ninfer_sm90.LIBRARY)
    ops["launched"] = module.launched
    return ops


def rel(a, b) -> float:
    assert not torch.isnan(a).any()
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("bias", [False, True])
def test_conv1d_update_source(ops, bias):
    T, C = 5, 300
    x = torch.randn(T, C + 40)[:, :C]  # strided, as the layer splits in_proj's output
    w, b, window = torch.randn(C, 4), torch.randn(C) if bias else None, torch.randn(C, 3)
    y, new_window = ops["causal_conv1d_update"](*map(cuda_like, (x, w, b, window)))
    want_y, want_window = ref.causal_conv1d_update(x, w, b, window)
    assert rel(y, want_y) < 1e-6 and torch.equal(new_window, want_window)


@pytest.mark.parametrize("T,bias", [(1, False), (2, True), (64, False), (150, True)])
def test_conv1d_prefill_source(ops, T, bias):
    C = 300
    x = torch.randn(T, C + 40)[:, :C]
    w, b, window = torch.randn(C, 4), torch.randn(C) if bias else None, torch.randn(C, 3)
    y, new_window = ops["causal_conv1d_prefill"](*map(cuda_like, (x, w, b, window)))
    want_y, want_window = ref.causal_conv1d_prefill(x, w, b, window)
    assert rel(y, want_y) < 1e-5 and torch.equal(new_window, want_window)


def layer_like(T, H=4, Hk=2, D=128, pad=3):
    y = torch.randn(T, 2 * Hk * D + H * D + pad)
    q, k, v = y[:, :Hk * D], y[:, Hk * D:2 * Hk * D], y[:, 2 * Hk * D:2 * Hk * D + H * D]
    b, a = torch.randn(T, 2 * H).split([H, H], dim=-1)
    return q.view(T, Hk, D), k.view(T, Hk, D), v.view(T, H, D), -F.softplus(a) * 2, torch.sigmoid(b)


@pytest.mark.parametrize("op,T,fresh", [("gdn_recurrent", 1, False), ("gdn_recurrent", 3, True),
                                        ("gdn_recurrent_states", 4, False), ("gdn_chunked", 5, False)])
def test_gated_delta_rule_source(ops, op, T, fresh):
    """(gdn_chunked: rows not 16-byte aligned, so the launcher serves it with the token-by-token kernel)"""
    q, k, v, g, beta = layer_like(T)
    s0 = None if fresh else torch.randn(4, 128, 128) * 0.3
    o, s = ops[op](*map(cuda_like, (q, k, v, g, beta, s0)))
    want_o, want_s = getattr(ref, op)(q, k, v, g, beta, s0)
    assert o.shape == want_o.shape and s.shape == want_s.shape
    assert rel(o, want_o) < 1e-5 and rel(s, want_s) < 1e-5


@pytest.mark.parametrize("T,fresh,bv,H,Hk", [(1, False, 32, 4, 2), (63, True, 16, 4, 2), (64, False, 32, 3, 1),
                                              (130, False, 16, 2, 2), (150, True, 32, 3, 1)])
def test_chunked_rule_source(ops, monkeypatch, T, fresh, bv, H, Hk):
    """The chunked prefill kernels (prep + state pass) against the reference, partial last chunks included."""
    monkeypatch.setenv("NINFER_GDN_CHUNK_BV", str(bv))
    q, k, v, g, beta = layer_like(T, H, Hk, pad=4)  # rows 16-byte aligned, as the chunked kernels need
    s0 = None if fresh else torch.randn(H, 128, 128) * 0.3
    o, s = ops["gdn_chunked"](*map(cuda_like, (q, k, v, g, beta, s0)))
    assert ops["launched"] == ["gdn_chunk_prep_f32_d128", f"gdn_chunk_state_f32_d128_v{bv}"]
    want_o, want_s = ref.gdn_chunked(q, k, v, g, beta, s0)
    assert o.shape == want_o.shape and s.shape == want_s.shape
    assert rel(o, want_o) < 1e-5 and rel(s, want_s) < 1e-5


@pytest.mark.parametrize("T,fresh,H,Hk", [(1, False, 4, 2), (64, True, 2, 2), (150, False, 3, 1)])
def test_chunked_rule_tensor_core_source(ops, monkeypatch, T, fresh, H, Hk):
    """The tensor-core state pass (gdn_chunked_mma.cuh, bf16 inputs) with its mma.sync fragments emulated per warp:
    the fragment index math, the cp.async staging and the 3xTF32 split against the reference (fp32 state)."""
    monkeypatch.setattr(launchers, "tensor_cores", lambda device_index: True)
    D = 128
    y = torch.randn(T, 2 * Hk * D + H * D + 8).to(torch.bfloat16)  # rows 16-byte aligned
    q, k, v = (y[:, a:b] for a, b in ((0, Hk * D), (Hk * D, 2 * Hk * D), (2 * Hk * D, 2 * Hk * D + H * D)))
    q, k, v = q.view(T, Hk, D), k.view(T, Hk, D), v.view(T, H, D)
    b, a = torch.randn(T, 2 * H).split([H, H], dim=-1)
    g, beta = -F.softplus(a) * 2, torch.sigmoid(b).to(torch.bfloat16)
    s0 = None if fresh else torch.randn(H, D, D) * 0.3
    o, s = ops["gdn_chunked"](*map(cuda_like, (q, k, v, g, beta, s0)))
    assert ops["launched"] == ["gdn_chunk_prep_bf16_d128", "gdn_chunk_state_mma_bf16_d128"]
    want_o, want_s = ref.gdn_chunked(q.float(), k.float(), v.float(), g, beta.float(), s0)
    assert o.dtype == torch.bfloat16 and o.shape == want_o.shape and s.shape == want_s.shape
    assert rel(o, want_o) < 5e-3 and rel(s, want_s) < 1e-5


@pytest.mark.parametrize("T,keep_all,fixed", [(1, False, True), (1, False, False), (3, True, True)])
def test_gated_recurrence_and_its_fixed_point_form_source(ops, T, keep_all, fixed):
    """The recurrence + gated output norm in one kernel (gdn_recurrent_gated) against the reference; for one token
    with fixed=True also the output's fixed-point form for a quantised out_proj (ninfer.quant.fixed, a head one group
    of 128; head 1 all zeros), bit for bit the reference's form of the output; verify calls attach nothing."""
    from ninfer.quant import fixed as fx

    H, Hk = 4, 2
    q, k, v, g, beta = layer_like(T, H, Hk, pad=4)
    z = torch.randn(T, H, 128) * 2
    z[:, 1] = 0  # silu(0) = 0: head 1's output all zeros, sx = 1
    w = torch.rand(128) + 0.5
    w[::37] = 9  # an outlier column in every head
    s0 = torch.randn(H, 128, 128) * 0.3
    want_o, want_s = ref.gdn_recurrent_gated(q, k, v, g, beta, s0.clone(), z, w, 1e-6, keep_all=keep_all)
    o, s = ops["gdn_recurrent_gated"](*map(cuda_like, (q, k, v, g, beta, s0.clone(), z, w)), 1e-6,
                                      keep_all=keep_all, fixed=fixed)
    assert ops["launched"] == ["gdn_recurrent_gated_f32_d128"]
    assert rel(o, want_o) < 1e-5 and rel(s, want_s) < 1e-5
    got = fx.attached(o)
    if not (fixed and T == 1 and not keep_all):
        assert got is None
        return
    assert got is not None
    xq, xg = fx.fixed_point(torch.Tensor(o).flatten())
    assert torch.equal(got[0], xq) and torch.equal(got[1], xg)
    assert xg[1, 0].view(torch.float32) == 1 and xg[1, 1] == 0 and (xg[:, 1] != 0).sum() == H - 1


@pytest.mark.parametrize("kb", [256, 128])  # int4 bursts (16 lanes a group, 8 values each), int8 (32 lanes, 4 each)
def test_fixed_point_form_made_per_burst_source(host_kernels, kb):
    """fixed_burst, as qmv1x's warps run it over a bf16 row, writes ninfer.quant.fixed's form bit for bit (the norms'
    form too): the same group scales and q, hi and lo in k_order, each group's sum the sum of its q. Outliers and a
    zero group."""
    from ninfer.quant import fixed as fx

    K = 2048
    torch.manual_seed(kb)
    x = torch.randn(K).to(torch.bfloat16)
    x[::97] *= 40
    x[256:384] = 0
    xq = torch.zeros(2, K, dtype=torch.int8)
    xg = torch.zeros(K // 128, 2, dtype=torch.int32)
    host_kernels.fixed_burst_bf16(kb, ctypes.c_void_p(x.data_ptr()), K, ctypes.c_void_p(xq.data_ptr()),
                                  ctypes.c_void_p(xg.data_ptr()))
    rq, rg = fx.fixed_point(x)
    assert torch.equal(xg[:, 0], rg[:, 0])  # sx = max |x| / 32512 (1 for the zero group), bit for bit

    def q_of(xq):  # q in natural k order from the two planes
        q = torch.empty(K, dtype=torch.int32)
        q[fx.k_order(K)] = 256 * xq[0].int() + xq[1].int()
        return q

    q, qr = q_of(xq), q_of(rq)
    assert torch.equal(xq, rq) and torch.equal(xg, rg)
    assert torch.equal(xg[:, 1], q.view(-1, 128).sum(-1)) and torch.equal(q, qr)
    assert (q.view(-1, 128).abs().amax(-1)[torch.arange(K // 128) != 2] >= 32511).all()  # each group's largest
    assert (q[256:384] == 0).all() and xg[2, 1] == 0
    sx = xg[:, 0].view(torch.float32)
    err = (q.view(-1, 128).float() * sx.view(-1, 1)).flatten() - x.float()
    assert (err.abs().view(-1, 128) <= sx.view(-1, 1) * 0.5001).all()  # rint: within half a step of x
