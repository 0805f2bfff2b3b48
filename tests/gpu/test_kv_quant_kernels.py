"""The quantised-KV kernels (kv_quant.cuh) against the reference ops of ninfer.quant.kv_ops, on every backend
that runs on this GPU and each of its dtypes, at the 8B (32 q / 8 kv heads of 128) and 27B (24 / 4 of 256)
shapes and a head_dim-64 one: the fused write (K centring, rotation, codes, scales) and decode / verify
attention (T <= 16) over int8, int4 and int4_norot caches scattered over a paged pool, poisoned outputs,
relative L2 < 1e-2. Prefill (T > 16: kvq_prefill, flash attention over the codes) and shapes the kernels do not
cover (fallbacks) must match as well."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.ops import DeviceSpec, resolve
from ninfer.quant import kv_ops
from ninfer.quant.kv_cache import dequantize_vectors, make_pool

TOL = 1e-2
FORMATS = ["int8", "int4", "int4_norot"]
SHAPES = [(32, 8, 128), (24, 4, 256), (16, 16, 64)]


def _keys(T, Hk, D, offset):
    """Keys with a per-channel offset (what K centring removes), values without."""
    return torch.randn(T, Hk, D, device="cuda") + offset


def _pools(fmt, num_blocks, bs, Hk, D):
    return make_pool(fmt, True, num_blocks, bs, Hk, D, "cuda"), make_pool(fmt, False, num_blocks, bs, Hk, D, "cuda")


def _poison(pool):
    pool.data.fill_(0x5A)
    pool.scale.fill_(float("nan"))
    if pool.offset is not None:
        pool.offset.fill_(float("nan"))


def _dequant(pool, slots):
    """The pool's entries at slots, dequantised: float32 [n, Hk, D]."""
    flat = lambda t: t.view(-1, *t.shape[2:])[slots]  # noqa: E731
    return dequantize_vectors(flat(pool.data), flat(pool.scale),
                              flat(pool.offset) if pool.offset is not None else None, pool)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("Hq,Hk,D", SHAPES)
def test_write_kv(backend, fmt, Hq, Hk, D):
    """A prefill chunk (fixes K's centre) then a decode token, into scattered slots of poisoned pools."""
    for dtype in backend_dtypes(backend):
        torch.manual_seed(D + Hk)
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        bs, nblk = 16, 40
        offset = 4 * torch.randn(Hk, D, device="cuda")
        slots = torch.randperm(nblk * bs, device="cuda")[:301]
        got_k, got_v = _pools(fmt, nblk, bs, Hk, D)
        want_k, want_v = _pools(fmt, nblk, bs, Hk, D)
        _poison(got_k)
        _poison(got_v)
        for chunk in (slice(0, 300), slice(300, 301)):
            k = _keys(chunk.stop - chunk.start, Hk, D, offset).to(dtype)
            v = torch.randn(chunk.stop - chunk.start, Hk, D, device="cuda").to(dtype)
            ops.write_kv(k, v, got_k, got_v, slots[chunk])
            kv_ops.write_kv(k, v, want_k, want_v, slots[chunk])
        assert got_k.centered and torch.equal(got_k.center, want_k.center)
        for got, want in ((got_k, want_k), (got_v, want_v)):
            assert rel_l2(_dequant(got, slots), _dequant(want, slots)) < TOL
            # the same codes but where the rotated value sits on a rounding boundary
            same = (got.data.view(-1, *got.data.shape[2:])[slots] == want.data.view(-1, *want.data.shape[2:])[slots])
            assert same.float().mean() > 0.99
            assert rel_l2(got.scale.view(-1, *got.scale.shape[2:])[slots].float(),
                          want.scale.view(-1, *want.scale.shape[2:])[slots].float()) < 1e-3


def _filled(fmt, L, spare, bs, Hk, D):
    """Pools holding L keys / values written by the reference, scattered through a larger pool."""
    capacity = (L + spare + bs - 1) // bs
    pool_blocks = capacity + 7
    kc, vc = _pools(fmt, pool_blocks, bs, Hk, D)
    block_table = torch.randperm(pool_blocks, device="cuda")[:capacity].to(torch.int32)
    pos = torch.arange(L, device="cuda")
    slots = block_table[pos // bs].long() * bs + pos % bs
    offset = 4 * torch.randn(Hk, D, device="cuda")
    for c in range(0, L, 4096):
        n = min(4096, L - c)
        kv_ops.write_kv(_keys(n, Hk, D, offset), torch.randn(n, Hk, D, device="cuda"), kc, vc, slots[c:c + n])
    return kc, vc, block_table


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("Hq,Hk,D", SHAPES)
@pytest.mark.parametrize("T,L", [(1, 1), (1, 137), (1, 8192), (4, 600), (16, 8192), (7, 70), (40, 1000)])
def test_paged_attention(backend, fmt, Hq, Hk, D, T, L):
    """T queries at positions L-T .. L-1 over L keys, the block table with spare capacity (split count from it)."""
    torch.manual_seed(L + T + D)
    bs = 64 if L >= 4096 else 16
    kc, vc, block_table = _filled(fmt, L, 500, bs, Hk, D)
    positions = torch.arange(L - T, L, device="cuda")
    scale = D ** -0.5
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        q = (2 * torch.randn(T, Hq, D, device="cuda")).to(dtype)
        want = kv_ops.paged_attention(q.float(), kc, vc, block_table, positions, scale)
        poison_allocator()
        out = ops.paged_attention(q, kc, vc, block_table, positions, scale)
        assert out.shape == (T, Hq, D) and out.dtype == dtype
        assert rel_l2(out, want) < TOL, (dtype, rel_l2(out, want))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("Hq,Hk,D", SHAPES)
def test_prefill_gather_is_bit_for_bit(backend, fmt, Hq, Hk, D):
    """Prefill's dequantisation of the used blocks (kvq_gather, one launch a pool, into the query's dtype) writes
    exactly what kv_ops._gather(...).to(dtype) computes: scattered blocks of a larger pool, output poisoned."""
    from ninfer.backends import installed_backends
    from ninfer.kernels.kv_quant import make_kv_quant_ops

    torch.manual_seed(D + Hk + 1)
    kc, vc, block_table = _filled(fmt, 1000, 100, 16, Hk, D)
    blocks = block_table[: (1000 + 15) // 16].long().contiguous()
    gather = make_kv_quant_ops(installed_backends()[backend].kernels)["paged_attention"].gather
    for dtype in backend_dtypes(backend):
        for pool in (kc, vc):
            want = kv_ops._gather(pool, blocks).to(dtype)
            poison_allocator()
            got = gather(pool, blocks, dtype)
            assert got.shape == want.shape and got.dtype == dtype
            assert torch.equal(got, want), (dtype, (got.float() - want.float()).abs().max())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("Hq,Hk,D", SHAPES)
@pytest.mark.parametrize("T,L,order", [(17, 17, "chunk"), (300, 300, "chunk"), (100, 2100, "chunk"),
                                       (1000, 5000, "chunk"), (53, 900, "shuffled")])
@pytest.mark.parametrize("form", ["larger", "smaller"])
def test_prefill_attention_fused(backend, fmt, Hq, Hk, D, T, L, order, form, monkeypatch):
    """Prefill (T > 16) through kvq_prefill, the codes dequantised inside the attention kernel: a first chunk
    (T = L), later chunks (queries at L-T .. L-1), and queries at positions in no order; against the float32
    reference, output poisoned. The dense pass (kvq_gather + SDPA) must not run at all. Both forms of the kernel
    (warps a block: 16 and 8 at head_dim 64 / 128, 8 and 4 at 256); the sm75 backend runs Turing's (m16n8k8,
    staging without cp.async, smaller tiles) on this GPU too."""
    from ninfer.kernels import kv_quant

    monkeypatch.setattr(kv_quant, "PREFILL_WARPS", kv_quant.prefill_warps(D)[form == "smaller"])  # the default mode

    def no_dense_pass(*a, **k):
        raise AssertionError("the quantised prefill took the dense pass")
    monkeypatch.setattr(kv_quant, "prefill_sdpa", no_dense_pass)
    torch.manual_seed(L + T + D + Hq)
    bs = 16 if L < 1000 else 64
    kc, vc, block_table = _filled(fmt, L, 300, bs, Hk, D)
    positions = torch.arange(L - T, L, device="cuda")
    if order == "shuffled":  # distinct positions in no order, the greatest last (the ops' contract)
        positions = torch.randperm(L - 1, device="cuda")[: T - 1]
        positions = torch.cat([positions, torch.tensor([L - 1], device="cuda")])
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        q = (2 * torch.randn(T, Hq, D, device="cuda")).to(dtype)
        want = kv_ops.paged_attention(q.float(), kc, vc, block_table, positions, D ** -0.5)
        poison_allocator()
        out = ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)
        assert out.shape == (T, Hq, D) and out.dtype == dtype
        assert not out.isnan().any()
        assert rel_l2(out, want) < TOL, (dtype, rel_l2(out, want))


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_prefill_fused_matches_dense_pass(backend, fmt, monkeypatch):
    """kvq_prefill against the dense pass it replaced (kvq_gather + torch SDPA, the same dequantised values) on a
    27B-shaped later chunk with strided query rows (q as the attention layer slices it from qkv)."""
    from ninfer.kernels import kv_quant

    Hq, Hk, D, T, L = 24, 4, 256, 600, 3000
    torch.manual_seed(11)
    kc, vc, block_table = _filled(fmt, L, 64, 64, Hk, D)
    positions = torch.arange(L - T, L, device="cuda")
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        qkv = torch.randn(T, (Hq + 2 * Hk) * D, device="cuda").to(dtype)
        q = qkv[:, : Hq * D].view(T, Hq, D)
        monkeypatch.setattr(kv_quant, "PREFILL_MODE", "fused")
        fused = ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)
        monkeypatch.setattr(kv_quant, "PREFILL_MODE", "gather")
        dense = ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)
        assert rel_l2(fused, dense) < 5e-3, (dtype, rel_l2(fused, dense))


def test_prefill_block_size_not_a_power_of_two_takes_the_dense_pass(backend, monkeypatch):
    """kvq_prefill pages by shifts: a pool of 24-token blocks runs the dense pass, with the reference's result."""
    from ninfer.kernels import kv_quant

    Hq, Hk, D = 16, 4, 128
    dtype = backend_dtypes(backend)[0]
    kc, vc, block_table = _filled("int8", 300, 40, 24, Hk, D)
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format="int8")
    monkeypatch.setattr(kv_quant, "PREFILL_MODE", "fused")
    dense_calls = []
    sdpa = kv_quant.prefill_sdpa
    monkeypatch.setattr(kv_quant, "prefill_sdpa", lambda *a: dense_calls.append(1) or sdpa(*a))
    positions = torch.arange(200, 300, device="cuda")
    q = torch.randn(100, Hq, D, device="cuda").to(dtype)
    out = ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)
    assert dense_calls == [1]
    want = kv_ops.paged_attention(q.float(), kc, vc, block_table, positions, D ** -0.5)
    assert rel_l2(out, want) < TOL


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_decode_steps_through_kernels(backend, fmt):
    """Prefill write, then decode steps each writing one token and attending over everything so far,
    kernels against the reference end to end (8B shape, strided q/k/v rows as the attention layer has them)."""
    Hq, Hk, D, bs = 32, 8, 128, 16
    for dtype in backend_dtypes(backend):
        torch.manual_seed(5)
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        got_k, got_v = _pools(fmt, 64, bs, Hk, D)
        want_k, want_v = _pools(fmt, 64, bs, Hk, D)
        block_table = torch.randperm(64, device="cuda")[:40].to(torch.int32)
        offset = 3 * torch.randn(Hk, D, device="cuda")
        L = 0
        for T in (200, 1, 1, 3):
            qkv = torch.randn(T, (Hq + 2 * Hk) * D, device="cuda").to(dtype)
            q, k, v = qkv.split([Hq * D, Hk * D, Hk * D], dim=-1)
            q, k, v = q.view(T, Hq, D), (k.view(T, Hk, D) + offset.to(dtype)), v.view(T, Hk, D)
            pos = torch.arange(L, L + T, device="cuda")
            slots = block_table[pos // bs].long() * bs + pos % bs
            ops.write_kv(k, v, got_k, got_v, slots)
            kv_ops.write_kv(k, v, want_k, want_v, slots)
            out = ops.paged_attention(q, got_k, got_v, block_table, pos, D ** -0.5)
            want = kv_ops.paged_attention(q.float(), want_k, want_v, block_table, pos, D ** -0.5)
            assert rel_l2(out, want) < TOL, (T, rel_l2(out, want))
            L += T


def test_uncovered_head_dim_falls_back(backend):
    """head_dim 96 has no kernel: write and attention are the reference ops' results exactly."""
    dtype = backend_dtypes(backend)[0]
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format="int8")
    Hq, Hk, D, bs = 8, 2, 96, 16
    got_k, got_v = _pools("int8", 8, bs, Hk, D)
    want_k, want_v = _pools("int8", 8, bs, Hk, D)
    k, v = torch.randn(2, 20, Hk, D, device="cuda").to(dtype)
    slots = torch.arange(20, device="cuda")
    ops.write_kv(k, v, got_k, got_v, slots)
    kv_ops.write_kv(k, v, want_k, want_v, slots)
    assert torch.equal(got_k.data, want_k.data) and torch.equal(got_v.scale, want_v.scale)
    q = torch.randn(1, Hq, D, device="cuda").to(dtype)
    bt, pos = torch.arange(8, dtype=torch.int32, device="cuda"), torch.tensor([19], device="cuda")
    assert torch.equal(ops.paged_attention(q, got_k, got_v, bt, pos, 0.1),
                       kv_ops.paged_attention(q, want_k, want_v, bt, pos, 0.1))


def prefill_peak(ops, fmt, dtype, Hq, Hk, D, T, L, bs):
    """Bytes one prefill call (T queries at the end of L keys, in a pool of bs-token blocks) allocates at its peak
    beyond its output, after a warm-up call (also bench/prefill_memory.py)."""
    if fmt == "bf16":
        nblk = L // bs
        kc, vc = (torch.randn(nblk + 8, bs, Hk, D, device="cuda", dtype=dtype) for _ in range(2))
        block_table = torch.randperm(nblk + 8, device="cuda")[:nblk].to(torch.int32)
    else:
        kc, vc, block_table = _filled(fmt, L, 0, bs, Hk, D)
    positions = torch.arange(L - T, L, device="cuda")
    q = torch.randn(T, Hq, D, device="cuda", dtype=dtype)
    ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)  # warm: kernels, allocator
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = ops.paged_attention(q, kc, vc, block_table, positions, D ** -0.5)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before - out.numel() * out.element_size()


@pytest.mark.parametrize("fmt,mode", [("bf16", "fused"), ("int8", "fused"), ("int4", "fused"), ("int8", "gather"),
                                      ("int4", "gather")])
def test_prefill_memory_per_context_token_is_what_the_planner_counts(backend, fmt, mode, monkeypatch):
    """The capacity planner counts what one layer's prefill attention copies per context token
    (capacity.prefill_copy_bytes_per_token): measured here as the slope of the call's peak allocation over two
    contexts, same chunk (256 queries at the end), 27B-shaped heads. A dense cache is gathered once, the quantised
    dense pass (NINFER_KVQ_PREFILL=gather) dequantised once, kvq_prefill copies nothing."""
    from types import SimpleNamespace

    from ninfer.kernels import kv_quant
    from ninfer.quant.capacity import prefill_copy_bytes_per_token

    Hq, Hk, D, T, bs = 24, 4, 256, 256, 64
    monkeypatch.setattr(kv_quant, "PREFILL_MODE", mode)
    cfg = SimpleNamespace(num_heads=Hq, num_kv_heads=Hk, head_dim=D)
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
        peaks = [prefill_peak(ops, fmt, dtype, Hq, Hk, D, T, L, bs) for L in (4096, 12288)]
        slope = (peaks[1] - peaks[0]) / (12288 - 4096)
        want = prefill_copy_bytes_per_token(cfg, fmt, dtype, torch.cuda.get_device_capability(), bs)
        if want == 0:
            assert slope < 16, (dtype, slope)
        else:
            assert abs(slope - want) <= 0.05 * want, (dtype, slope, want)
