"""Reference ``write_kv`` and ``paged_attention`` for quantised KV pools (formats int8, int4, int4_norot).

Same contracts as ``ninfer.reference.ops`` with a :class:`QuantKVPool` in place of each cache
tensor. Semantics kernels must match: K centring, the K/V rotation and quantisation happen inside the
write; the query rotation, all dequantisation and the output's inverse rotation inside attention;
nothing is stored dequantised.
"""

from __future__ import annotations

import torch

from ..reference import ops as ref
from .kv_cache import QuantKVPool, dequantize_vectors, quantize_vectors, rotate


def _store(x: torch.Tensor, pool: QuantKVPool, slots: torch.Tensor) -> None:
    data, scale, offset = quantize_vectors(x, pool)
    pool.data.view(-1, *pool.data.shape[2:])[slots] = data
    pool.scale.view(-1, *pool.scale.shape[2:])[slots] = scale
    if offset is not None:
        pool.offset.view(-1, *pool.offset.shape[2:])[slots] = offset


def write_kv(k: torch.Tensor, v: torch.Tensor, k_cache: QuantKVPool, v_cache: QuantKVPool,
             slots: torch.Tensor) -> None:
    """Quantise and store. k, v: [T, Hk, D]; slots: [T] int64 pool slots."""
    _store(k, k_cache, slots)
    _store(v, v_cache, slots)


def _gather(pool: QuantKVPool, blocks: torch.Tensor) -> torch.Tensor:
    """The sequence's blocks dequantised: float32 [nblk, bs, Hk, D]."""
    off = pool.offset[blocks] if pool.offset is not None else None
    return dequantize_vectors(pool.data[blocks], pool.scale[blocks], off, pool)


def paged_attention(q: torch.Tensor, k_cache: QuantKVPool, v_cache: QuantKVPool, block_table: torch.Tensor,
                    positions: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention over quantised pools. q: [T, Hq, D] -> [T, Hq, D] in q's dtype."""
    bs = k_cache.data.shape[1]
    nblk = (int(positions[-1].item()) + bs) // bs
    blocks = block_table[:nblk].long()
    k = _gather(k_cache, blocks)  # [nblk, bs, Hk, D], rotated if the pool rotates
    v = _gather(v_cache, blocks)
    qf = rotate(q.float()) if k_cache.rotate else q.float()  # (qH).(kH) = q.k
    local = torch.arange(nblk, dtype=torch.int32, device=q.device)
    o = ref.paged_attention(qf, k, v, local, positions, scale)  # the bf16 contract on the gathered blocks
    if v_cache.rotate:
        o = rotate(o)  # H is its own inverse
    return o.to(q.dtype)
