"""The fused decode kernels (add_rms_norm, rope_write_kv, linear_silu_mul, attention with the split merge
in its last block) against the reference ops, on fresh random inputs of real shapes, poisoned outputs,
in each dtype the backend serves; and the NINFER_FUSED=0 path (the unfused kernels) against the same
reference, so the A/B in bench/RESULTS.md compares two correct paths."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.backends import installed_backends
from ninfer.kernels.ops import make_ops
from ninfer.reference import ops as ref

TOL = 1e-2
ALL_FUSIONS = "add_rms_norm,rope_write_kv,linear_silu_mul,attention_merge"  # the opt-in merge too


@pytest.fixture(params=["fused", "unfused"])
def launchers(request, backend, monkeypatch):
    """The backend's launchers built with the fusions on or off (NINFER_FUSED is read when they are made)."""
    monkeypatch.setenv("NINFER_FUSED", ALL_FUSIONS if request.param == "fused" else "0")
    return make_ops(installed_backends()[backend].kernels)


def randn(*shape, dtype, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


@pytest.mark.parametrize("shape,zc", [((1, 4096), False), ((1, 5120), True), ((7, 4096), False),
                                      ((300, 5120), True), ((3, 1, 2048), False),
                                      # several vectors a thread; past 4 a thread (the two-pass loop); a short row
                                      ((2, 12288), False), ((1, 40960), True), ((4, 136), False)])
def test_add_rms_norm(backend, launchers, shape, zc):
    for dtype in backend_dtypes(backend):
        x, r = randn(*shape, dtype=dtype, scale=2.0), randn(*shape, dtype=dtype, scale=3.0)
        w = randn(shape[-1], dtype=dtype, scale=0.5)
        poison_allocator()
        y, h = launchers["add_rms_norm"](x, r, w, 1e-6, zc)
        want_y, want_h = ref.add_rms_norm(x, r, w, 1e-6, zc)  # the sum rounds to dtype, as the model stores it
        assert y.shape == shape and h.shape == shape and y.dtype == dtype and h.dtype == dtype
        assert torch.equal(h, want_h)
        assert rel_l2(y, ref.rms_norm(want_h.float(), w.float(), 1e-6, zc)) < TOL


# Llama-3-8B (no q/k norm), Qwen3-8B (per-head norm), Qwen3.5-27B attention (zero-centred norm, gated q,
# partial rotary 64 of 256); verify widths and a prefill chunk
@pytest.mark.parametrize("T,Hq,Hk,D,rd,norm,gated", [(1, 32, 8, 128, 128, False, False),
                                                     (1, 32, 8, 128, 128, True, False),
                                                     (1, 24, 4, 256, 64, True, True),
                                                     (5, 32, 8, 128, 128, True, False),
                                                     (300, 16, 2, 64, 64, False, False)])
def test_rope_write_kv(backend, launchers, T, Hq, Hk, D, rd, norm, gated):
    zc = gated  # Qwen3.5's norms are zero-centred
    for dtype in backend_dtypes(backend):
        cos_sin = ref.rope_cos_sin(20000, rd, 1e6, device="cuda")
        q_width = Hq * D * (2 if gated else 1)
        qkv = randn(T, q_width + 2 * Hk * D, dtype=dtype)  # the layer passes strided views of one output
        q, k, v = qkv.split([q_width, Hk * D, Hk * D], dim=-1)
        q = q.view(T, Hq, 2 * D)[..., :D] if gated else q.view(T, Hq, D)
        k, v = k.view(T, Hk, D), v.view(T, Hk, D)
        qn = randn(D, dtype=dtype, scale=0.5) if norm else None
        kn = randn(D, dtype=dtype, scale=0.5) if norm else None
        blocks, bs = (T + 100) // 16 + 1, 16
        kc, vc = randn(blocks, bs, Hk, D, dtype=dtype), randn(blocks, bs, Hk, D, dtype=dtype)
        want_k, want_v = kc.clone(), vc.clone()
        positions = torch.sort(torch.randint(0, 20000, (T,), device="cuda")).values
        slots = torch.randperm(blocks * bs, device="cuda")[:T]
        want_q = ref.rope_write_kv(q, k, v, positions, cos_sin, want_k, want_v, slots, qn, kn, 1e-6, zc)
        poison_allocator()
        got_q = launchers["rope_write_kv"](q, k, v, positions, cos_sin, kc, vc, slots, qn, kn, 1e-6, zc)
        assert got_q.shape == (T, Hq, D) and got_q.dtype == dtype
        assert rel_l2(got_q, want_q) < TOL
        written = torch.zeros(blocks * bs, dtype=torch.bool, device="cuda")
        written[slots] = True
        kf, wkf = kc.view(-1, Hk, D), want_k.view(-1, Hk, D)
        assert rel_l2(kf[written], wkf[written]) < TOL
        assert torch.equal(kf[~written], wkf[~written])  # nothing else in the cache moved
        assert torch.equal(vc, want_v)


@pytest.mark.parametrize("T,K,I", [(1, 4096, 14336), (1, 5120, 17408), (1, 4096, 12288), (1, 2048, 100),
                                   (3, 4096, 14336)])
def test_linear_silu_mul(backend, launchers, T, K, I):
    for dtype in backend_dtypes(backend):
        x, W = randn(T, K, dtype=dtype), randn(2 * I, K, dtype=dtype, scale=K ** -0.5)
        poison_allocator()
        y = launchers["linear_silu_mul"](x, W)
        assert y.shape == (T, I) and y.dtype == dtype
        assert rel_l2(y, ref.linear_silu_mul(x.float(), W.float())) < TOL


@pytest.mark.parametrize("K,I", [(4096, 14336), (5120, 17408), (2048, 100), (4104, 33), (520, 1)])
def test_linear_silu_mul_two_warps(backend, launchers, K, I, monkeypatch):
    """The one-token gate_up + SwiGLU with the gate and up rows on two warps (fused.cuh: gemv_silu2, forced by
    NINFER_GEMV_SILU2=1 whatever the backend's tuning): against the reference, and bit for bit gemv_silu."""
    for dtype in backend_dtypes(backend):
        x, W = randn(1, K, dtype=dtype), randn(2 * I, K, dtype=dtype, scale=K ** -0.5)
        monkeypatch.setenv("NINFER_GEMV_SILU2", "1")
        poison_allocator()
        y = launchers["linear_silu_mul"](x, W)
        assert y.shape == (1, I) and rel_l2(y, ref.linear_silu_mul(x.float(), W.float())) < TOL
        monkeypatch.setenv("NINFER_GEMV_SILU2", "0")
        poison_allocator()
        assert torch.equal(y, launchers["linear_silu_mul"](x, W)), f"{dtype} {2 * I}x{K}: differs from gemv_silu"


@pytest.mark.parametrize("T,L,Hq,Hk,D,spare", [(1, 513, 32, 8, 128, 191), (1, 8192, 32, 8, 128, 500),
                                               (4, 700, 24, 4, 256, 60), (16, 300, 16, 16, 64, 0),
                                               (1, 1, 32, 8, 128, 4000)])
def test_attention_split_merge(backend, launchers, T, L, Hq, Hk, D, spare):
    """Decode/verify attention, the split merge in the split kernel's last block (fused) or in the combine
    kernel (unfused); run twice, so the split counters the fused kernel leaves behind are seen reset."""
    for dtype in backend_dtypes(backend):
        bs = 16
        nblk = (L + spare + bs - 1) // bs
        kc, vc = randn(nblk + 3, bs, Hk, D, dtype=dtype), randn(nblk + 3, bs, Hk, D, dtype=dtype)
        block_table = torch.randperm(nblk + 3, device="cuda")[:nblk].to(torch.int32)
        positions = torch.arange(L - T, L, device="cuda")
        for _ in range(2):
            q = randn(T, Hq, D, dtype=dtype)
            poison_allocator()
            out = launchers["paged_attention"](q, kc, vc, block_table, positions, D ** -0.5)
            want = ref.paged_attention(q.float(), kc.float(), vc.float(), block_table, positions, D ** -0.5)
            assert rel_l2(out, want) < TOL
