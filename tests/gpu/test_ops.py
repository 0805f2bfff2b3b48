"""Every kernel op against the reference op, on fresh random inputs of real shapes (8B, 27B), in each
dtype the backend serves. Tolerance: relative L2 < 1e-2 (bf16/fp16 outputs; the reference runs in
float32 on upcast inputs); integer and copy ops exactly."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.backends import installed_backends
from ninfer.kernels import gemv
from ninfer.ops import DeviceSpec, resolve
from ninfer.reference import ops as ref

TOL = 1e-2


def opset(backend, dtype):
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
    assert ops.impls["linear"].backend == backend  # the kernel, not the fallback, is under test
    return ops


def randn(*shape, dtype, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


@pytest.mark.parametrize("T", [1, 2, 3, 8, 9, 16, 64])
@pytest.mark.parametrize("K,N,bias", [(4096, 6144, False), (4096, 24576, False), (12288, 4096, False),
                                      (5120, 1024, True), (17408, 5120, False), (4096, 151936, False),
                                      (6144, 5120, False),  # split-K 2 at one token (kernels/gemv.py:split_k)
                                      (5120, 96, False),  # a Gated DeltaNet in_proj_ba: 6 row tiles
                                      (4104, 1000, True)])  # K % 32 != 0, N % 16 != 0: partial chunk and tile
@pytest.mark.parametrize("mode", ["auto", "mma", "simt"])  # kernels/gemv.py: default, tensor cores, CUDA cores
def test_linear(backend, T, K, N, bias, mode, monkeypatch):
    monkeypatch.setattr(gemv, "MODE", mode)
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, W = randn(T, K, dtype=dtype), randn(N, K, dtype=dtype, scale=K ** -0.5)
        b = randn(N, dtype=dtype) if bias else None
        poison_allocator()
        y = ops.linear(x, W, b)
        want = ref.linear(x.float(), W.float(), None if b is None else b.float())
        assert y.shape == (T, N) and y.dtype == dtype
        assert rel_l2(y, want) < TOL


@pytest.mark.parametrize("K,N,bias", [(4096, 6144, False), (4096, 4096, True), (14336, 4096, False),
                                      (5120, 16480, False), (6144, 5120, False), (17408, 5120, True),
                                      (4104, 1001, True),  # odd N (a pair's second row past the end), K % 256 != 0
                                      (520, 7, False), (5120, 96, False)])
def test_linear_pairs(backend, K, N, bias, monkeypatch):
    """The one-token GEMV with two rows a warp (gemv.cuh: gemv_rows, NINFER_GEMV_PAIRS=1 forced, whatever the
    backend's tuning): against the reference, and bit for bit the one-row-a-warp kernel with the same K split
    (a row's sum does not depend on the rows a warp or the loads in flight)."""
    rows_w, sk = gemv.form(N, K, True)
    assert rows_w == 2 or N > 16384 + 256
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, W = randn(1, K, dtype=dtype), randn(N, K, dtype=dtype, scale=K ** -0.5)
        b = randn(N, dtype=dtype) if bias else None
        monkeypatch.setenv("NINFER_GEMV_PAIRS", "1")
        poison_allocator()
        y = ops.linear(x, W, b)
        assert rel_l2(y, ref.linear(x.float(), W.float(), None if b is None else b.float())) < TOL
        monkeypatch.setenv("NINFER_GEMV_PAIRS", "0")
        monkeypatch.setenv("NINFER_GEMV_SPLITK", str(sk) if sk > 1 else "0")
        poison_allocator()
        assert torch.equal(y, ops.linear(x, W, b)), f"{dtype} {N}x{K}: pairs differ from one row a warp, split {sk}"
        monkeypatch.delenv("NINFER_GEMV_SPLITK")


@pytest.mark.parametrize("ksg", ["1", "2", "4", "8"])
@pytest.mark.parametrize("T", [1, 5, 16])
def test_linear_mma_splits(backend, T, ksg, monkeypatch):
    """Every K split of the tensor-core GEMV (forced), the last-block finish and, without counters (a first
    call inside a graph capture), the separate reduce launch: the same value either way."""
    K, N = 4104, 1000
    monkeypatch.setenv("NINFER_GEMV_KSG", ksg)
    for dtype in backend_dtypes(backend):
        lib = installed_backends()[backend].kernels
        x, W, b = randn(T, K, dtype=dtype), randn(N, K, dtype=dtype, scale=K ** -0.5), randn(N, dtype=dtype)
        want = ref.linear(x.float(), W.float(), b.float())
        poison_allocator()
        y = gemv.MmaGemv(lib)(x, W, b)
        assert rel_l2(y, want) < TOL
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
            poison_allocator()
            y2 = gemv.MmaGemv(lib)(x, W, b)  # no counters: partials, then gemv_mma_reduce
            ys2 = gemv.MmaGemv(lib)(x, torch.cat([W, W]), None, silu=True)
        assert torch.equal(y, y2)
        ys = gemv.MmaGemv(lib)(x, torch.cat([W, W]), None, silu=True)  # gate = up = x W^T
        assert torch.equal(ys, ys2)
        gf = ref.linear(x.float(), W.float()).to(dtype).float()
        assert rel_l2(ys, (torch.nn.functional.silu(gf) * gf).to(dtype)) < TOL


@pytest.mark.parametrize("K,N", [(4096, 6144), (5120, 1024), (4104, 1000), (17408, 5120), (5120, 96)])
def test_linear_batch_invariant(backend, K, N, monkeypatch):
    """NINFER_GEMV=mma: column t of a T-token GEMV is bitwise the 1-token GEMV of token t, for every T <= 16
    (the speculative verify forward computes what decoding computes), with and without bias."""
    monkeypatch.setattr(gemv, "MODE", "mma")
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, W, b = randn(16, K, dtype=dtype), randn(N, K, dtype=dtype, scale=K ** -0.5), randn(N, dtype=dtype)
        for bias in (None, b):
            single = torch.cat([ops.linear(x[t:t + 1], W, bias) for t in range(16)])  # [16, N]
            for T in (2, 3, 4, 7, 8, 9, 12, 16):
                assert torch.equal(ops.linear(x[:T], W, bias), single[:T]), (dtype, T, bias is not None)


@pytest.mark.parametrize("K,I", [(4096, 14336), (5120, 17408), (4104, 1000)])
def test_linear_silu_mul_batch_invariant(backend, K, I, monkeypatch):
    """NINFER_GEMV=mma: the fused gate_up + SwiGLU GEMV equals silu_mul(linear(x, W)) bitwise, and column t of
    T tokens equals its 1-token call (decode's fused op == verify's)."""
    monkeypatch.setattr(gemv, "MODE", "mma")
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, W = randn(16, K, dtype=dtype), randn(2 * I, K, dtype=dtype, scale=K ** -0.5)
        single = torch.cat([ops.linear_silu_mul(x[t:t + 1], W) for t in range(16)])  # [16, I]
        for T in (1, 2, 8, 9, 16):
            y = ops.linear_silu_mul(x[:T], W)
            assert torch.equal(y, single[:T]), (dtype, T)
            assert torch.equal(y, ops.silu_mul(ops.linear(x[:T], W))), (dtype, T)
        assert rel_l2(single, ref.linear_silu_mul(x.float(), W.float())) < TOL


@pytest.mark.parametrize("shape,zc", [((1, 4096), False), ((7, 5120), True), ((64, 4096), False),
                                      ((5, 32, 128), False), ((16, 24, 256), True),
                                      # several vectors a thread; past 4 a thread (the two-pass loop); 129 vectors
                                      ((3, 12288), False), ((2, 40960), True), ((5, 1032), False)])
def test_rms_norm(backend, shape, zc):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, w = randn(*shape, dtype=dtype, scale=3.0), randn(shape[-1], dtype=dtype, scale=0.5)
        poison_allocator()
        y = ops.rms_norm(x, w, 1e-6, zc)
        assert rel_l2(y, ref.rms_norm(x.float(), w.float(), 1e-6, zc)) < TOL


@pytest.mark.parametrize("T", [1, 4, 33])
def test_rms_norm_gated(backend, T):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x, z, w = randn(T, 48, 128, dtype=dtype), randn(T, 48, 128, dtype=dtype), randn(128, dtype=dtype)
        poison_allocator()
        y = ops.rms_norm_gated(x, z, w, 1e-6)
        assert rel_l2(y, ref.rms_norm_gated(x.float(), z.float(), w.float(), 1e-6)) < TOL


@pytest.mark.parametrize("T,Hq,Hk,D,rd", [(1, 32, 8, 128, 128), (16, 32, 8, 128, 128), (9, 24, 4, 256, 64),
                                          (300, 16, 2, 64, 64)])
def test_rope(backend, T, Hq, Hk, D, rd):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        cos_sin = ref.rope_cos_sin(20000, rd, 1e6, device="cuda")
        # q and k as strided views of one fused qkv output, as the attention layer passes them
        qkv = randn(T, (Hq + 2 * Hk) * D, dtype=dtype)
        q, k, _ = qkv.split([Hq * D, Hk * D, Hk * D], dim=-1)
        q, k = q.view(T, Hq, D), k.view(T, Hk, D)
        positions = torch.sort(torch.randint(0, 20000, (T,), device="cuda")).values
        poison_allocator()
        qo, ko = ops.rope(q, k, positions, cos_sin)
        rq, rk = ref.rope(q.float(), k.float(), positions, cos_sin)
        assert rel_l2(qo, rq) < TOL and rel_l2(ko, rk) < TOL


@pytest.mark.parametrize("T,I", [(1, 12288), (16, 17408), (100, 14336)])
def test_silu_mul(backend, T, I):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x = randn(T, 2 * I, dtype=dtype, scale=2.0)
        poison_allocator()
        assert rel_l2(ops.silu_mul(x), ref.silu_mul(x.float())) < TOL


@pytest.mark.parametrize("T,Hk,D", [(1, 8, 128), (16, 4, 256), (200, 8, 128)])
def test_write_kv(backend, T, Hk, D):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        blocks, bs = 64, 16
        kc, vc = randn(blocks, bs, Hk, D, dtype=dtype), randn(blocks, bs, Hk, D, dtype=dtype)
        kv = randn(T, 2 * Hk * D, dtype=dtype)
        k, v = (t.view(T, Hk, D) for t in kv.split([Hk * D, Hk * D], dim=-1))  # strided views
        slots = torch.randperm(blocks * bs, device="cuda")[:T]
        want_k, want_v = kc.clone(), vc.clone()
        ref.write_kv(k, v, want_k, want_v, slots)
        ops.write_kv(k, v, kc, vc, slots)
        assert torch.equal(kc, want_k) and torch.equal(vc, want_v)


@pytest.mark.parametrize("T,V", [(1, 151936), (4, 248320), (16, 128256), (1, 248320), (2, 8192), (3, 8193),
                                 (1, 2048 * 1024 + 5)])  # one block per row up to 8192, then the two passes
def test_argmax(backend, T, V):
    for dtype in [torch.float32, *backend_dtypes(backend)]:
        ops = opset(backend, backend_dtypes(backend)[0])
        logits = randn(T, V, dtype=dtype, scale=3.0)
        poison_allocator()
        assert torch.equal(ops.argmax(logits), torch.argmax(logits, dim=-1))


@pytest.mark.parametrize("V", [8000, 248320])
def test_argmax_ties_pick_the_first(backend, V):
    """Equal maxima within one block's chunk, in different chunks, at the row's ends: the lowest index wins (as
    torch.argmax); a row of -inf gives 0."""
    for dtype in [torch.float32, *backend_dtypes(backend)]:
        ops = opset(backend, backend_dtypes(backend)[0])
        logits = randn(5, V, dtype=dtype)
        logits[0, [V - 1, 7, 300, V // 2]] = 100.0
        logits[1, [V // 2 + 1, V // 2, V - 1]] = 100.0
        logits[2, [0, V - 1]] = 100.0
        logits[3, [V - 1]] = 100.0
        logits[4] = float("-inf")
        poison_allocator()
        got = ops.argmax(logits)
        assert got.tolist() == [7, V // 2, 0, V - 1, 0]
        assert torch.equal(got, torch.argmax(logits, dim=-1))


@pytest.mark.parametrize("T,H,D", [(1, 24, 256), (16, 24, 256), (37, 32, 128), (3, 16, 64)])
def test_sigmoid_mul(backend, T, H, D):
    """The attention output gate, its gate a strided view into a q projection's output as the layer passes it."""
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x = randn(T, H, D, dtype=dtype)
        qkv = randn(T, H * 2 * D + 2 * 4 * D, dtype=dtype, scale=3.0)
        gate = qkv[:, : H * 2 * D].view(T, H, 2 * D)[..., D:]  # [T, H, D] at strides (row, 2D, 1)
        poison_allocator()
        y = ops.sigmoid_mul(x, gate)
        assert y.shape == (T, H, D) and y.dtype == dtype
        assert rel_l2(y, ref.sigmoid_mul(x.float(), gate.float())) < TOL


@pytest.mark.parametrize("H,D", [(24, 256), (32, 128), (3, 128), (5, 256)])
def test_sigmoid_mul_writes_the_fixed_point_form(backend, H, D):
    """fixed=True on one token: the gated output as without it, and its fixed-point form for the quantised o
    projection (ninfer.quant.fixed) attached, bit for bit the form of the stored output (H = 3, 5: a block's last
    warp partly or half filled); several tokens attach nothing."""
    from ninfer.quant import fixed

    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x = randn(1, H, D, dtype=dtype)
        x[0, 1, :128] = 0  # a zero group: sx = 1
        x[0, 0, 7] = 40  # an outlier
        qkv = randn(1, H * 2 * D + 2 * 4 * D, dtype=dtype, scale=3.0)
        gate = qkv[:, : H * 2 * D].view(1, H, 2 * D)[..., D:]
        y0 = ops.sigmoid_mul(x, gate)
        poison_allocator()
        y = ops.sigmoid_mul(x, gate, fixed=True)
        assert torch.equal(y, y0) and fixed.attached(y0) is None
        got = fixed.attached(y)
        assert got is not None, (dtype, H, D)
        xq, xg = fixed.fixed_point(y.flatten())
        assert torch.equal(got[0], xq) and torch.equal(got[1], xg), (dtype, H, D)
        flat = fixed.carried(y, y.reshape(1, H * D))
        assert fixed.attached(flat) is not None
        y2 = ops.sigmoid_mul(torch.cat([x, x]), torch.cat([gate, gate]), fixed=True)
        assert fixed.attached(y2) is None


def _chain(ops, x, Ws, w, gate):
    """Launch after launch, each reading what the one before wrote and writing into memory the allocator just
    freed (a kernel overlapping its predecessor would read stale data or overwrite what is still being read)."""
    for W in Ws:
        x = ops.rms_norm(ops.linear(x, W), w, 1e-6)
        x = ops.sigmoid_mul(x.view(1, -1, 128), gate).view(1, -1)
        x = ops.linear_silu_mul(x, torch.cat([W, W]))
    return x, ops.argmax(torch.cat([x.float()] * 3, dim=-1))  # 12288 wide: the two-pass argmax


def test_pdl_changes_no_bit(backend, monkeypatch):
    """PDL (sm_90+: each kernel's blocks start while its predecessor runs and wait for it on the GPU) gives the
    bits of plain launches, eager and replayed from a CUDA graph; on a Hopper GPU the kernels do launch with it."""
    from ninfer.backends import installed_backends
    from ninfer.kernels import launch

    dtype = backend_dtypes(backend)[0]
    ops = opset(backend, dtype)
    lib = installed_backends()[backend].kernels
    major = torch.cuda.get_device_capability()[0]
    assert lib.module(torch.device("cuda"))[f"rms_norm_{'bf16' if dtype == torch.bfloat16 else 'f16'}"].pdl == \
        (major >= 9)
    K = 4096
    Ws = [randn(K, K, dtype=dtype, scale=K ** -0.5) for _ in range(6)]
    w, gate = randn(K, dtype=dtype), randn(1, K // 128, 128, dtype=dtype)
    x0 = randn(1, K, dtype=dtype)
    out = {}
    for pdl in (False, True):
        monkeypatch.setattr(launch, "PDL", pdl)
        poison_allocator()
        eager = _chain(ops, x0, Ws, w, gate)
        static_x = x0.clone()
        _chain(ops, static_x, Ws, w, gate)  # warm-up outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            graphed = _chain(ops, static_x, Ws, w, gate)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        out[pdl] = (eager, (graphed[0].clone(), graphed[1].clone()))
    for i in range(2):
        for j in range(2):
            assert torch.equal(out[False][i][j], out[True][i][j])
    assert torch.equal(out[True][0][0], out[True][1][0])  # graph replay == eager


@pytest.mark.parametrize("pre", ["0", "2"])
def test_gemv_first_rounds_before_the_wait_change_no_bit(pre):
    """The one-token GEMVs with the next round in flight (gemv_rows, gemv_silu2) load their first round of weights
    before the PDL wait (gemv.cuh: NINFER_GEMV_PRE=1, the default); built with 0 (an L2 prefetch there, as before) or
    2 (two rounds) they give the same bits: the loads move, the sums do not. sm90 (where PDL runs), eager and replayed
    from a CUDA graph, on the Llama-3-8B and Qwen3.5-27B decode shapes that take these kernels."""
    backend = "sm90"
    if not torch.cuda.is_available() or backend not in installed_backends():
        pytest.skip("needs a CUDA GPU and the sm90 backend")
    lib = installed_backends()[backend].kernels
    dtype = torch.bfloat16
    ops = opset(backend, dtype)
    shapes = [(4096, 6144), (4096, 4096), (14336, 4096), (5120, 16480), (6144, 5120), (17408, 5120), (4104, 1001)]
    cases = [(randn(1, K, dtype=dtype), randn(N, K, dtype=dtype, scale=K ** -0.5)) for K, N in shapes]
    gate_up = (randn(1, 4096, dtype=dtype), randn(2 * 14336, 4096, dtype=dtype, scale=4096 ** -0.5))

    def run():
        outs = [ops.linear(x, W) for x, W in cases] + [ops.linear_silu_mul(*gate_up)]  # also the graph's warm-up
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static = [ops.linear(x, W) for x, W in cases[:2]] + [ops.linear_silu_mul(*gate_up)]
        g.replay()
        torch.cuda.synchronize()
        return outs, [s.clone() for s in static]

    base = lib.options
    want = run()
    try:
        lib.set_options(base + (f"-DNINFER_GEMV_PRE={pre}",))
        poison_allocator()
        got = run()
    finally:
        lib.set_options(base)
    for a, b in zip(want[0] + want[1], got[0] + got[1]):
        assert torch.equal(a, b), f"NINFER_GEMV_PRE={pre} changed a GEMV's bits"
    assert torch.equal(want[0][0], want[1][0]) and torch.equal(want[0][-1], want[1][-1])  # graph == eager
