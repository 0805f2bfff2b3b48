"""Paged attention against the reference: decode (T=1), verify (T<=16) and prefill chunks, over block
tables that scatter the context across the pool, at short and long (8K) contexts, 8B and 27B head shapes."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.kernels.library import ATTN_CLUSTER_FORMS
from ninfer.ops import DeviceSpec, resolve
from ninfer.reference import ops as ref

TOL = 1e-2


def _check_against_reference(backend, dtype, pool, bs, block_table, T, L, Hq, Hk, D):
    """Random K/V pools and T queries at positions L-T .. L-1 through ``block_table``: the backend's paged attention
    (outputs poisoned) against the float32 reference."""
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
    kc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
    vc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
    q = torch.randn(T, Hq, D, device="cuda").to(dtype)
    positions = torch.arange(L - T, L, device="cuda")
    scale = D ** -0.5
    poison_allocator()
    out = ops.paged_attention(q, kc, vc, block_table, positions, scale)
    want = ref.paged_attention(q.float(), kc.float(), vc.float(), block_table, positions, scale)
    assert out.shape == (T, Hq, D) and out.dtype == dtype
    assert rel_l2(out, want) < TOL


@pytest.mark.parametrize("Hq,Hk,D", [(32, 8, 128), (24, 4, 256), (16, 16, 64)])
@pytest.mark.parametrize("T,L", [(1, 1), (1, 137), (1, 8192), (4, 600), (16, 8192), (16, 16), (40, 1000), (300, 300)])
@pytest.mark.parametrize("bs", [16, 64])
def test_paged_attention(backend, Hq, Hk, D, T, L, bs):
    """T new queries at positions L-T .. L-1 over a context of L keys; the block table has spare capacity."""
    for dtype in backend_dtypes(backend):
        capacity_blocks = (L + 500 + bs - 1) // bs
        pool = capacity_blocks + 7
        block_table = torch.randperm(pool, device="cuda")[:capacity_blocks].to(torch.int32)
        _check_against_reference(backend, dtype, pool, bs, block_table, T, L, Hq, Hk, D)


@pytest.mark.parametrize("Hq,Hk,D", [(32, 8, 128), (24, 4, 256), (16, 16, 64)])
@pytest.mark.parametrize("T,L", [(1, 1), (1, 33), (1, 513), (1, 4100), (4, 4100), (16, 700), (1, 20000), (3, 20000)])
@pytest.mark.parametrize("block_rows", [8, 4, 2])
def test_paged_attention_32k_table(backend, Hq, Hk, D, T, L, block_rows, monkeypatch):
    """A block table of 32K tokens (a GPU server's default max context): the kernels shrink the capacity's splits
    to the context (a split of 33 keys up to 256-key splits at 20000), in one or several rounds of loads per block;
    blocks of up to 4 query rows run the one-pass form (with at most ONE_PASS_MAX_SPLITS splits), larger ones the
    two-pass form; the launcher's rows per block (BLOCK_ROWS, and DECODE_BLOCK_ROWS for one token's group of more
    than 4) 8, 4 and 2."""
    from ninfer.kernels import attention

    monkeypatch.setattr(attention, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(attention, "DECODE_BLOCK_ROWS", block_rows)
    _check_in_a_32k_table(backend, T, L, Hq, Hk, D)


def _check_in_a_32k_table(backend, T, L, Hq, Hk, D):
    """_check_against_reference over a block table of 32K tokens (blocks of 64) whose first L tokens are used."""
    bs = 64
    for dtype in backend_dtypes(backend):
        used = (L + bs - 1) // bs
        pool = used + 5
        block_table = torch.zeros(32768 // bs, device="cuda", dtype=torch.int32)
        block_table[:used] = torch.randperm(pool, device="cuda")[:used].to(torch.int32)
        _check_against_reference(backend, dtype, pool, bs, block_table, T, L, Hq, Hk, D)


def _record_kernels(monkeypatch) -> list[str]:
    """The names of the kernels launched from now on (looked up in a loaded module)."""
    from ninfer.kernels.launch import Module

    names, lookup = [], Module.__getitem__
    monkeypatch.setattr(Module, "__getitem__", lambda self, name: names.append(name) or lookup(self, name))
    return names


@pytest.mark.parametrize("form", ATTN_CLUSTER_FORMS)
@pytest.mark.parametrize("Hq,Hk,D", [(32, 8, 128), (16, 16, 64), (8, 2, 256)])
@pytest.mark.parametrize("L", [1, 5, 33, 513, 4100, 20000])
def test_paged_attention_cluster(backend, form, Hq, Hk, D, L, monkeypatch):
    """Decode attention in one launch (NINFER_ATTN_CLUSTER: a cluster of blocks per kv head, each over an equal run
    of the context, merged through the blocks' shared memory), in a 32K-token table: contexts shorter than the
    cluster (empty blocks), one key to a few per block, and thousands per block."""
    monkeypatch.setenv("NINFER_ATTN_CLUSTER", form)
    launched = _record_kernels(monkeypatch)
    _check_in_a_32k_table(backend, 1, L, Hq, Hk, D)
    assert any(n.startswith(f"attention_{form}_") for n in launched), launched


@pytest.mark.parametrize("Hq,Hk,D", [(32, 8, 128), (24, 4, 256)])
@pytest.mark.parametrize("T", [1, 4])
def test_attention_right_after_the_kv_write_in_a_graph(backend, Hq, Hk, D, T):
    """RoPE + KV write, then paged attention, as a layer runs them, captured in one CUDA graph (PDL on sm_90+: the
    attention may start while the write still runs) and replayed step after step, the positions moving on. Each new
    query is its own key scaled up, so attention puts nearly all its weight on this step's own keys: an attention
    that read any of them before the write landed (or a stale copy the next step) would be far off. The cache slots
    start poisoned. Against the float32 reference on the cache the graph wrote. The sm90 backend's decode attention
    requests the older keys before its wait (NINFER_PDL_EARLY_LOADS, kernels.cu) and this step's after it."""
    _kv_write_then_attention(backend, Hq, Hk, D, T)


@pytest.mark.parametrize("Hq,Hk,D", [(32, 8, 128), (16, 16, 64)])
def test_cluster_attention_right_after_the_kv_write(backend, Hq, Hk, D, monkeypatch):
    """The one-launch decode attention (cluster16w4) after RoPE + KV write in a graph, as above (the sm90 backend
    with its early loads)."""
    monkeypatch.setenv("NINFER_ATTN_CLUSTER", "cluster16w4")
    launched = _record_kernels(monkeypatch)
    _kv_write_then_attention(backend, Hq, Hk, D, 1)
    assert any(n.startswith("attention_cluster16w4_") for n in launched), launched


def _kv_write_then_attention(backend, Hq, Hk, D, T):
    dtype = backend_dtypes(backend)[0]
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
    bs, L0, steps = 16, 300, 6
    cap = 1024
    pool = cap // bs + 3
    block_table = torch.randperm(pool, device="cuda")[: cap // bs].to(torch.int32)
    kc = torch.full((pool, bs, Hk, D), 30.0, device="cuda").to(dtype)  # poison: would dominate any stale read
    vc = torch.full((pool, bs, Hk, D), -30.0, device="cuda").to(dtype)
    old = torch.arange(L0, device="cuda")
    slot_of = lambda p: block_table[p // bs].long() * bs + p % bs  # noqa: E731
    kc.view(-1, Hk, D)[slot_of(old)] = (torch.randn(L0, Hk, D, device="cuda") * 0.3).to(dtype)
    vc.view(-1, Hk, D)[slot_of(old)] = torch.randn(L0, Hk, D, device="cuda").to(dtype)
    cos_sin = ref.rope_cos_sin(cap, D, 1e6, device="cuda")
    scale = D ** -0.5
    qkv = torch.empty(T, (Hq + 2 * Hk) * D, device="cuda", dtype=dtype)  # static inputs of the graph
    positions = torch.empty(T, dtype=torch.int64, device="cuda")
    slots = torch.empty(T, dtype=torch.int64, device="cuda")

    def layer():
        q, k, v = qkv.split([Hq * D, Hk * D, Hk * D], dim=-1)
        q, k, v = q.view(T, Hq, D), k.view(T, Hk, D), v.view(T, Hk, D)
        q = ops.rope_write_kv(q, k, v, positions, cos_sin, kc, vc, slots)
        return ops.paged_attention(q, kc, vc, block_table, positions, scale)

    def stage(step):
        p = torch.arange(L0 + step * T, L0 + (step + 1) * T, device="cuda")
        positions.copy_(p)
        slots.copy_(slot_of(p))
        k = torch.randn(T, Hk, D, device="cuda") * 0.6
        q = (k.repeat_interleave(Hq // Hk, dim=1) * 3.0)  # each query head: its kv head's new key, scaled
        v = torch.randn(T, Hk, D, device="cuda")
        qkv.copy_(torch.cat([q.reshape(T, -1), k.reshape(T, -1), v.reshape(T, -1)], dim=-1).to(dtype))

    stage(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compiles, allocations (the cache write of step 0 is redone below)
        layer()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = layer()
    for step in range(steps):
        stage(step)
        g.replay()
        qf = qkv[:, : Hq * D].float().view(T, Hq, D)
        kf = qkv[:, Hq * D: (Hq + Hk) * D].float().view(T, Hk, D)
        want_q, want_k = ref.rope(qf, kf, positions, cos_sin)  # the graph's RoPE'd queries and keys
        assert rel_l2(kc.view(-1, Hk, D)[slots], want_k) < TOL  # this step's keys are in the cache
        want = ref.paged_attention(want_q, kc.float(), vc.float(), block_table, positions, scale)
        err = rel_l2(out, want)
        assert err < TOL, (step, err)
        # the new keys carry the attention: the output is near this step's values, not the cache's poison
        assert float(out.float().abs().max()) < 10.0, step


@pytest.mark.parametrize("Hq,Hk,D", [(24, 4, 256), (32, 8, 128), (16, 16, 64)])
@pytest.mark.parametrize("T,L", [(1, 1), (1, 640), (1, 20000), (4, 700), (16, 16)])
@pytest.mark.parametrize("block_rows", [8, 2])
def test_attention_gated_is_attention_then_the_gate(backend, Hq, Hk, D, T, L, block_rows, monkeypatch):
    """attention_gated (the output gate applied by the combine kernel in decode and verify) gives bit for bit the
    backend's paged_attention followed by its sigmoid_mul, the gate a strided view into a q projection's output as
    the layer passes it; for one token with fixed=True, the fixed-point form sigmoid_mul attaches (the form of the
    stored output). It launches no sigmoid_mul, except for a form whose 128-value groups span heads (D = 64), where
    it composes the two. Against the float32 reference too."""
    from ninfer.kernels import attention
    from ninfer.kernels.launch import Module
    from ninfer.quant import fixed as fx

    monkeypatch.setattr(attention, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(attention, "DECODE_BLOCK_ROWS", block_rows)
    names, lookup = [], Module.__getitem__
    monkeypatch.setattr(Module, "__getitem__", lambda self, name: names.append(name) or lookup(self, name))
    bs = 64
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
        used = (L + bs - 1) // bs
        pool = used + 5
        block_table = torch.zeros(32768 // bs, device="cuda", dtype=torch.int32)
        block_table[:used] = torch.randperm(pool, device="cuda")[:used].to(torch.int32)
        kc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
        vc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
        q = torch.randn(T, Hq, D, device="cuda").to(dtype)
        qkv = (torch.randn(T, Hq * 2 * D + 2 * Hk * D, device="cuda") * 3).to(dtype)
        gate = qkv[:, : Hq * 2 * D].view(T, Hq, 2 * D)[..., D:]  # [T, Hq, D] at strides (row, 2D, 1)
        positions = torch.arange(L - T, L, device="cuda")
        scale = D ** -0.5
        for fixed in (False, True):
            want = ops.sigmoid_mul(ops.paged_attention(q, kc, vc, block_table, positions, scale), gate, fixed)
            names.clear()
            poison_allocator()
            got = ops.attention_gated(q, kc, vc, block_table, positions, scale, gate, fixed)
            assert got.shape == (T, Hq, D) and got.dtype == dtype
            assert torch.equal(got, want), (dtype, fixed)
            fused = not (fixed and T == 1 and D % 128)
            assert any(n.startswith("attention_combine_gate") for n in names) == fused, names
            assert any(n.startswith("sigmoid_mul") for n in names) != fused, names
            form, want_form = fx.attached(got), fx.attached(want)
            assert (form is None) == (want_form is None) == (not fixed or T > 1), (dtype, fixed, T, D)
            if form is not None:
                assert torch.equal(form[0], want_form[0]) and torch.equal(form[1], want_form[1])
                xq, xg = fx.fixed_point(got.flatten())
                assert torch.equal(form[0], xq) and torch.equal(form[1], xg)
        exact = ref.attention_gated(q.float(), kc.float(), vc.float(), block_table, positions, scale, gate.float())
        assert rel_l2(got, exact) < TOL


def test_attention_gated_in_prefill_composes(backend):
    """A prefill chunk (T past the decode kernels' 16) runs torch SDPA and the gate after it: the same values as
    the reference."""
    for dtype in backend_dtypes(backend):
        ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
        T, Hq, Hk, D, bs = 40, 24, 4, 256, 16
        pool = 8
        block_table = torch.randperm(pool, device="cuda").to(torch.int32)
        kc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
        vc = torch.randn(pool, bs, Hk, D, device="cuda").to(dtype)
        q = torch.randn(T, Hq, D, device="cuda").to(dtype)
        gate = torch.randn(T, Hq, 2 * D, device="cuda").to(dtype)[..., :D]
        positions = torch.arange(T, device="cuda")
        got = ops.attention_gated(q, kc, vc, block_table, positions, D ** -0.5, gate)
        want = ref.attention_gated(q.float(), kc.float(), vc.float(), block_table, positions, D ** -0.5, gate.float())
        assert got.shape == (T, Hq, D) and rel_l2(got, want) < TOL
