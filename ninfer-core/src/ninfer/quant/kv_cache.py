"""Quantised KV-cache formats: int8 (group 64) and int4 (per token and head), both with a block
Hadamard rotation and K centring.

A quantised pool stands where a bf16 cache tensor stands (``ctx.kv.k[layer]``), so attention
layers pass it to ``write_kv`` / ``paged_attention`` unchanged and the op registered for the KV
format reads it. Per token and head:

- int8: symmetric, one fp16 scale per 64 elements: x ~ q * s, q in [-127, 127].
- int4: asymmetric, one fp16 scale and one fp16 offset per head vector: x ~ u * s + m, u in 0..15,
  two codes per byte (even element in the low nibble).

Two transforms make 4 (and 8) bits enough, both exact in exact arithmetic:
- K centring: the first write fixes a per-(layer, head) vector c (the mean key of the first chunk) and
  every key is stored as k - c. Scores q.(k - c) = q.k - q.c differ by a constant per query, which the
  softmax ignores (SageAttention's "smooth K"); Llama-family keys carry large per-channel offsets
  (|mean| up to 12 against a spread of ~1 in SmolLM2), which this removes from the quantised range.
- Rotation: K (int4 and int8) and V (int8) are multiplied by a block-diagonal normalised Hadamard matrix
  H (after RoPE). H is orthogonal and its own inverse, so attention applies H to the query
  ((qH).(kH) = q.k) and, for a rotated V, to its output (sum p (vH) = (sum p v) H), while the rotation
  spreads outlier channels over the block (SAW-INT4, QuaRot). "int4_norot" is int4 with centring but no
  rotation, kept to measure the rotation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..errors import NinferError

KV_FORMATS = ("bf16", "int8", "int4", "int4_norot")
INT8_GROUP = 64
INT4_GROUP = 64  # per token and head for head_dim 64
ROTATE_INT8 = True  # K and V: spreads outlier channels, the int8 step shrinks with the range
ROTATE_INT4_V = False  # measured: rotating V as well cost perplexity on SmolLM2 (+4.1% vs -0.8%)


@dataclass
class QuantKVPool:
    """One layer's K or V pool in a quantised format."""

    data: torch.Tensor  # int8 [blocks, bs, Hk, D] | uint8 [blocks, bs, Hk, D/2]
    scale: torch.Tensor  # fp16 [blocks, bs, Hk, D/group]
    offset: torch.Tensor | None  # fp16 [blocks, bs, Hk, D/group] (int4), else None
    bits: int
    group: int
    head_dim: int
    rotate: bool = False  # block Hadamard applied before quantising (int4 K)
    center: torch.Tensor | None = None  # float32 [Hk, D]: K's per-channel offset, subtracted before quantising
    centered: bool = False  # whether ``center`` has been set (by the first write)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        b, bs, hk, _ = self.data.shape
        return (b, bs, hk, self.head_dim)


def hadamard_block(head_dim: int) -> int:
    """The rotation's block: the largest power of two dividing head_dim, at most 128."""
    b = 1
    while head_dim % (b * 2) == 0 and b * 2 <= 128:
        b *= 2
    return b


@functools.lru_cache(maxsize=16)
def hadamard(n: int, device: str = "cpu") -> torch.Tensor:
    """Normalised Sylvester Hadamard matrix [n, n] (symmetric and orthogonal: H @ H = I)."""
    h = torch.ones(1, 1, dtype=torch.float32)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).to(device)


def rotate(x: torch.Tensor) -> torch.Tensor:
    """Block Hadamard on the last dim (float32 in, float32 out). x: [..., D]."""
    d = x.shape[-1]
    b = hadamard_block(d)
    h = hadamard(b, str(x.device))
    return (x.reshape(*x.shape[:-1], d // b, b) @ h).reshape(x.shape)


def make_pool(fmt: str, is_key: bool, num_blocks: int, block_size: int, kv_heads: int, head_dim: int,
              device) -> QuantKVPool:
    shape = (num_blocks, block_size, kv_heads)
    center = torch.zeros(kv_heads, head_dim, dtype=torch.float32, device=device) if is_key else None
    if fmt == "int8":
        g = INT8_GROUP if head_dim % INT8_GROUP == 0 else head_dim
        return QuantKVPool(torch.zeros(*shape, head_dim, dtype=torch.int8, device=device),
                           torch.zeros(*shape, head_dim // g, dtype=torch.float16, device=device), None,
                           8, g, head_dim, rotate=ROTATE_INT8, center=center)
    if fmt in ("int4", "int4_norot"):
        if head_dim % 2:
            raise NinferError(f"An int4 KV cache needs an even head_dim, got {head_dim}; use --kv-cache int8.")
        g = INT4_GROUP if head_dim % INT4_GROUP == 0 else head_dim
        return QuantKVPool(torch.zeros(*shape, head_dim // 2, dtype=torch.uint8, device=device),
                           torch.zeros(*shape, head_dim // g, dtype=torch.float16, device=device),
                           torch.zeros(*shape, head_dim // g, dtype=torch.float16, device=device),
                           4, g, head_dim, rotate=fmt == "int4" and (is_key or ROTATE_INT4_V), center=center)
    raise NinferError(f"Unknown KV cache format {fmt!r}; choose one of {', '.join(KV_FORMATS)}.")


def bytes_per_token(fmt: str, num_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> float:
    """K and V bytes one token takes in every full-attention layer, scales included."""
    if fmt == "int8":
        g = INT8_GROUP if head_dim % INT8_GROUP == 0 else head_dim
        per_head = head_dim + 2 * head_dim // g
    elif fmt in ("int4", "int4_norot"):
        g = INT4_GROUP if head_dim % INT4_GROUP == 0 else head_dim
        per_head = head_dim // 2 + 4 * head_dim // g
    else:
        per_head = head_dim * torch.empty((), dtype=dtype).element_size()
    return 2 * num_layers * kv_heads * per_head


# -- quantise / dequantise one set of vectors -------------------------------------------------
def quantize_vectors(x: torch.Tensor, pool: QuantKVPool):
    """x: [T, Hk, D] float -> (data, scale, offset) shaped like pool entries for T tokens."""
    xf = x.float()
    if pool.center is not None:
        if not pool.centered:  # the first write fixes the offset: the mean key of the first chunk
            pool.center.copy_(xf.mean(0))
            pool.centered = True
        xf = xf - pool.center
    if pool.rotate:
        xf = rotate(xf)
    t, hk, d = xf.shape
    xg = xf.view(t, hk, d // pool.group, pool.group)  # [T, Hk, G, g]
    if pool.bits == 8:
        s = (xg.abs().amax(-1) / 127.0).to(torch.float16)  # [T, Hk, G]
        s = torch.where(s == 0, torch.ones_like(s), s)
        q = torch.clamp(torch.round(xg / s.float().unsqueeze(-1)), -127, 127).to(torch.int8)
        return q.view(t, hk, d), s, None
    lo, hi = xg.amin(-1), xg.amax(-1)
    m = lo.to(torch.float16)
    s = ((hi - m.float()) / 15.0).to(torch.float16)
    s = torch.where(s == 0, torch.ones_like(s), s)
    u = torch.clamp(torch.round((xg - m.float().unsqueeze(-1)) / s.float().unsqueeze(-1)), 0, 15).to(torch.uint8)
    u = u.view(t, hk, d // 2, 2)
    return (u[..., 0] | (u[..., 1] << 4)), s, m


def dequantize_vectors(data: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, pool: QuantKVPool
                       ) -> torch.Tensor:
    """Pool entries [..., Hk, D or D/2] -> float32 [..., Hk, D] (still rotated if the pool rotates)."""
    lead = data.shape[:-1]
    g = pool.group
    if pool.bits == 8:
        x = data.float().view(*lead, -1, g) * scale.float().unsqueeze(-1)
    else:
        u = torch.stack([data & 0x0F, data >> 4], dim=-1).view(*lead, -1, g).float()
        x = u * scale.float().unsqueeze(-1) + offset.float().unsqueeze(-1)
    return x.reshape(*lead, pool.head_dim)
