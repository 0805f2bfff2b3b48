"""GGUF quantised tensors repacked into ninfer's grouped-int layout, kept quantised.

Each ggml type maps exactly (same float32 arithmetic as ggml's ``dequantize_row_*``):
- Q8_0: 32 int8 + fp16 d -> int8, group 32, symmetric: (u - 128) * d.
- Q4_0: 32 nibbles (elements 0..15 low, 16..31 high) + fp16 d -> int4, group 32: (u - 8) * d.
- Q4_1: + fp16 m -> int4, group 32, float offset: d * u + m.
- Q4_K: 256-element super-blocks of eight 32-groups, scale d * sc and min dmin * mn (6-bit each)
  -> int4, group 32, float32 scales and offsets: (d * sc) * u - dmin * mn.
- Q6_K: sixteen 16-groups of 6-bit codes, int8 scales -> int8 codes 0..63, group 16, zero 32,
  float32 scale d * sc.
Other types return None and are dequantised at load by the GGUF reader.
"""

from __future__ import annotations

import torch

from ..weights.gguf_quants import k_scale_min, nibbles, shifts
from .layout import QuantWeight, pack_codes

KEPT_QUANTISED = ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K")


def _f16(b: torch.Tensor) -> torch.Tensor:
    """[..., 2] bytes -> [...] fp16."""
    return b.contiguous().view(torch.float16).squeeze(-1)


def gguf_quant_weight(checkpoint, name: str) -> QuantWeight | None:
    """``checkpoint`` is a ``weights.gguf.GGUFCheckpoint``; rows come back in HF order."""
    info = checkpoint.tensor_info(name)
    kind = info.type_name
    if kind not in KEPT_QUANTISED or len(info.shape) != 2:
        return None
    n, k = info.shape
    raw = checkpoint.raw(name)  # uint8 [N, bytes per row]
    if kind == "Q8_0":
        b = raw.view(n, k // 32, 34)
        codes = (b[..., 2:].contiguous().view(torch.int8).to(torch.int16) + 128).view(n, k)
        return QuantWeight(pack_codes(codes, 8), _f16(b[..., :2]), 8, 32, k)
    if kind in ("Q4_0", "Q4_1"):
        head = 2 if kind == "Q4_0" else 4
        b = raw.view(n, k // 32, head + 16)
        codes = nibbles(b[..., head:].reshape(-1, 16)).view(n, k)  # [N, K]
        mins = _f16(b[..., 2:4]) if kind == "Q4_1" else None
        return QuantWeight(pack_codes(codes, 4), _f16(b[..., :2]), 4, 32, k, mins=mins)
    if kind == "Q4_K":
        b = raw.view(-1, 144)  # [N*K/256, 144]
        nb = b.shape[0]
        d, dmin = _f16(b[:, :2]).float(), _f16(b[:, 2:4]).float()
        sc, mn = k_scale_min(b[:, 4:16])
        scales = (d[:, None] * sc.float()).view(n, k // 32)
        mins = -(dmin[:, None] * mn.float()).view(n, k // 32)
        codes = (b[:, 16:].reshape(nb, 4, 1, 32) >> shifts(b, 0, 4).reshape(1, 1, 2, 1)) & 0x0F  # [nb, 4, 2, 32]
        return QuantWeight(pack_codes(codes.reshape(n, k), 4), scales, 4, 32, k, mins=mins)
    # Q6_K
    b = raw.view(-1, 210)
    nb = b.shape[0]
    ql, qh = b[:, :128], b[:, 128:192]
    sc = b[:, 192:208].contiguous().view(torch.int8).float()  # [nb, 16]
    d = _f16(b[:, 208:210]).float()
    lo = ((ql.reshape(nb, 2, 1, 64) >> shifts(b, 0, 4).reshape(1, 1, 2, 1)) & 0x0F).reshape(nb, 8, 32)
    hi = ((qh.reshape(nb, 2, 1, 32) >> shifts(b, 0, 2, 4, 6).reshape(1, 1, 4, 1)) & 0x03).reshape(nb, 8, 32)
    codes = (lo | (hi << 4)).reshape(n, k)  # 0..63, value = code - 32
    zeros = torch.full((n, k // 16), 32, dtype=torch.uint8)
    return QuantWeight(pack_codes(codes, 8), (d[:, None] * sc).view(n, k // 16), 8, 16, k, zeros=zeros)
