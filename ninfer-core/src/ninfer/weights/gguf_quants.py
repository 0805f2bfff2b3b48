"""Dequantisation of ggml block formats, vectorised in torch, to float32.

Each function takes the stored blocks as uint8 `[n_blocks, block_bytes]` and returns float32
`[n_blocks, block_elems]`. The arithmetic follows ggml's reference order (ggml-quants.c
`dequantize_row_*`), so results equal llama.cpp's and the `gguf` package's bit for bit.
"""

from __future__ import annotations

import torch

QK_K = 256  # elements in a K-quant super-block


def _f16(b: torch.Tensor) -> torch.Tensor:
    """[n, 2] little-endian fp16 bytes -> [n, 1] float32."""
    return b.contiguous().view(torch.float16).float()


def shifts(like: torch.Tensor, *values: int) -> torch.Tensor:
    """Bit shifts as a uint8 tensor on `like`'s device (dequantisation also runs on the GPU)."""
    return torch.tensor(values, dtype=torch.uint8, device=like.device)


def nibbles(qs: torch.Tensor) -> torch.Tensor:
    """[n, 16] packed bytes -> [n, 32]: low nibbles are elements 0..15, high nibbles 16..31."""
    return ((qs.unsqueeze(1) >> shifts(qs, 0, 4).reshape(1, 2, 1)) & 0x0F).reshape(qs.shape[0], 32)


def _fifth_bits(qh: torch.Tensor) -> torch.Tensor:
    """[n, 4] bytes of a little-endian u32 -> [n, 32]: bit i is element i's high bit."""
    bits = (qh.unsqueeze(-1) >> shifts(qh, *range(8))) & 1  # [n, 4, 8]
    return bits.reshape(qh.shape[0], 32)


def f32(b):
    return b.contiguous().view(torch.float32)


def f16(b):
    return b.contiguous().view(torch.float16).float()


def bf16(b):
    return b.contiguous().view(torch.bfloat16).float()


# In-place float ops below (mul_, add_) save allocations; products keep ggml's order, (d * q) + m.
def q8_0(b):
    d = _f16(b[:, :2])
    return b[:, 2:].contiguous().view(torch.int8).float().mul_(d)


def q4_0(b):
    d = _f16(b[:, :2])
    return nibbles(b[:, 2:]).float().sub_(8).mul_(d)  # q - 8 is exact in float32


def q4_1(b):
    d, m = _f16(b[:, :2]), _f16(b[:, 2:4])
    return nibbles(b[:, 4:]).float().mul_(d).add_(m)


def q5_0(b):
    d = _f16(b[:, :2])
    q = nibbles(b[:, 6:]) | (_fifth_bits(b[:, 2:6]) << 4)
    return q.float().sub_(16).mul_(d)


def q5_1(b):
    d, m = _f16(b[:, :2]), _f16(b[:, 2:4])
    q = nibbles(b[:, 8:]) | (_fifth_bits(b[:, 4:8]) << 4)
    return q.float().mul_(d).add_(m)


def k_scale_min(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K: 12 bytes hold eight 6-bit scales and eight 6-bit mins -> two [n, 8]."""
    s = s.reshape(-1, 3, 4)
    d, m, md = s[:, 0], s[:, 1], s[:, 2]
    sc = torch.cat([d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)], dim=1)
    mn = torch.cat([m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)], dim=1)
    return sc, mn


def q2_k(b):
    n = b.shape[0]
    scales, qs = b[:, :16], b[:, 16:80]
    d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
    dl = (d * (scales & 0x0F).float()).reshape(n, 16, 1)
    ml = (dmin * (scales >> 4).float()).reshape(n, 16, 1)
    q = (qs.reshape(n, 2, 1, 32) >> shifts(b, 0, 2, 4, 6).reshape(1, 1, 4, 1)) & 3  # [n, 2, 4, 32]
    return (dl * q.reshape(n, 16, 16).float() - ml).reshape(n, QK_K)


def q3_k(b):
    n = b.shape[0]
    hmask, qs, scales = b[:, :32], b[:, 32:96], b[:, 96:108]
    d = _f16(b[:, 108:110])
    lo = (scales[:, :8].reshape(n, 1, 8) >> shifts(b, 0, 4).reshape(1, 2, 1)).reshape(n, 16)
    hi = (scales[:, 8:].reshape(n, 1, 4) >> shifts(b, 0, 2, 4, 6).reshape(1, 4, 1)).reshape(n, 16)
    sc = ((lo & 0x0F) | ((hi & 0x03) << 4)).to(torch.int8) - 32  # 6-bit signed scales
    dl = (d * sc.float()).reshape(n, 16, 1)
    ql = ((qs.reshape(n, 2, 1, 32) >> shifts(b, 0, 2, 4, 6).reshape(1, 1, 4, 1)) & 3).reshape(n, 16, 16)
    qh = ((hmask.reshape(n, 1, 1, 32) >> shifts(b, *range(8)).reshape(1, 1, 8, 1)) & 1)
    qh = qh.reshape(n, 16, 16) ^ 1  # a set mask bit means "no -4 offset"
    q = ql.to(torch.int8) - (qh << 2).to(torch.int8)
    return (dl * q.float()).reshape(n, QK_K)


def q4_k(b):
    n = b.shape[0]
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    sc, mn = k_scale_min(b[:, 4:16])
    dl = (d * sc.float()).reshape(n, 8, 1)
    ml = (dmin * mn.float()).reshape(n, 8, 1)
    q = (b[:, 16:].reshape(n, 4, 1, 32) >> shifts(b, 0, 4).reshape(1, 1, 2, 1)) & 0x0F  # [n, 4, 2, 32]
    return (dl * q.reshape(n, 8, 32).float() - ml).reshape(n, QK_K)


def q5_k(b):
    n = b.shape[0]
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    sc, mn = k_scale_min(b[:, 4:16])
    qh, qs = b[:, 16:48], b[:, 48:]
    dl = (d * sc.float()).reshape(n, 8, 1)
    ml = (dmin * mn.float()).reshape(n, 8, 1)
    ql = ((qs.reshape(n, 4, 1, 32) >> shifts(b, 0, 4).reshape(1, 1, 2, 1)) & 0x0F).reshape(n, 8, 32)
    hb = ((qh.reshape(n, 1, 1, 32) >> shifts(b, *range(8)).reshape(1, 1, 8, 1)) & 1).reshape(n, 8, 32)
    q = ql | (hb << 4)
    return (dl * q.float() - ml).reshape(n, QK_K)


def q6_k(b):
    n = b.shape[0]
    ql, qh = b[:, :128], b[:, 128:192]
    scales = b[:, 192:208].contiguous().view(torch.int8).float()
    d = (_f16(b[:, 208:210]) * scales).reshape(n, 16, 1)
    lo = ((ql.reshape(n, 2, 1, 64) >> shifts(b, 0, 4).reshape(1, 1, 2, 1)) & 0x0F).reshape(n, 8, 32)
    hi = ((qh.reshape(n, 2, 1, 32) >> shifts(b, 0, 2, 4, 6).reshape(1, 1, 4, 1)) & 0x03).reshape(n, 8, 32)
    q = (lo | (hi << 4)).to(torch.int8) - 32
    return (d * q.reshape(n, 16, 16).float()).reshape(n, QK_K)


def _plain(dtype):
    return lambda b: b.contiguous().view(dtype).float()


DEQUANTIZERS = {
    "F32": f32, "F16": f16, "BF16": bf16, "F64": _plain(torch.float64), "I8": _plain(torch.int8),
    "I16": _plain(torch.int16), "I32": _plain(torch.int32), "I64": _plain(torch.int64), "Q8_0": q8_0, "Q4_0": q4_0, "Q4_1": q4_1,
    "Q5_0": q5_0, "Q5_1": q5_1, "Q2_K": q2_k, "Q3_K": q3_k, "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k,
}


def dequantize(raw: torch.Tensor, type_name: str, block_bytes: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Stored bytes (uint8, any shape) of a `type_name` tensor -> float32 of `shape`."""
    fn = DEQUANTIZERS.get(type_name)
    if fn is None:
        from ..errors import NinferError

        raise NinferError(f"ninfer cannot dequantise ggml type {type_name}; use a GGUF quantised as "
                          f"one of {', '.join(DEQUANTIZERS)}.")
    blocks = raw.reshape(-1, block_bytes)  # [n_blocks, block_bytes]
    return fn(blocks).reshape(shape)
