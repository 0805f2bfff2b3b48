"""Paged attention against the reference: decode (T=1), verify (T<=16) and prefill chunks, over block
tables that scatter the context across the pool, at short and long (8K) contexts, 8B and 27B head shapes."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
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
@pytest.mark.parametrize("block_rows", [8, 4])
def test_paged_attention_32k_table(backend, Hq, Hk, D, T, L, block_rows, monkeypatch):
    """A block table of 32K tokens (a GPU server's default max context): the kernels shrink the capacity's splits
    to the context (a split of 33 keys up to 256-key splits at 20000), in one or several rounds of loads per block;
    blocks of up to 4 query rows run the one-pass form (with at most ONE_PASS_MAX_SPLITS splits), larger ones the
    two-pass form; the launcher's rows per block (BLOCK_ROWS) 8 and 4."""
    from ninfer.kernels import attention

    monkeypatch.setattr(attention, "BLOCK_ROWS", block_rows)
    bs = 64
    for dtype in backend_dtypes(backend):
        used = (L + bs - 1) // bs
        pool = used + 5
        block_table = torch.zeros(32768 // bs, device="cuda", dtype=torch.int32)
        block_table[:used] = torch.randperm(pool, device="cuda")[:used].to(torch.int32)
        _check_against_reference(backend, dtype, pool, bs, block_table, T, L, Hq, Hk, D)
