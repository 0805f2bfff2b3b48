"""The one internal layout of quantised weights: groupwise int8 / int4 along the input dim.

Every reader (compressed-tensors, GPTQ, GGUF) repacks into :class:`QuantWeight`, and every GEMM
(the reference here, kernels in the backends) consumes it. Element ``W[n, k]`` is

    u = unsigned code of (n, k)                 # 0 .. 2**bits - 1
    g = k // group_size
    W[n, k] = (u - zeros[n, g]) * scales[n, g]  # integer zero point (GPTQ, compressed-tensors, Q8_0, Q4_0)
    W[n, k] =  u * scales[n, g] + mins[n, g]    # float offset (GGUF Q4_1: d * q + m)

Packing: int8 stores one code per byte, ``qweight`` uint8 [N, K]; int4 stores two per byte, the
even column in the low nibble, ``qweight`` uint8 [N, K/2] (the byte order compressed-tensors and
GPTQ use on little-endian machines, so their files repack without shuffling). ``zeros`` None means
symmetric: the implicit zero point 2**(bits-1). ``perm`` (GPTQ act-order) names the input column
each packed column came from: ``y = x[..., perm] @ W_packed^T``.

On GPUs with tensor cores the codes are repacked once, at load, into 16-row tiles (``packing ==
"tiles16"``, :func:`pack_tiles`): the order in which the tensor-core GEMV's lanes read them. Scales,
zeros and mins keep their [N, K/group_size] form, and :func:`unpack_codes` undoes the tiling, so every
reader of the codes (the reference GEMM, the prefill dequantise) works on either packing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from ..errors import NinferError

LAYOUTS = {8: "int8_grouped", 4: "int4_grouped"}


@dataclass
class QuantWeight:
    qweight: torch.Tensor  # uint8 [N, K] (int8) or [N, K/2] (int4)
    scales: torch.Tensor  # float [N, K/group_size]
    bits: int
    group_size: int
    in_features: int
    zeros: torch.Tensor | None = None  # uint8/int16 [N, K/group_size], unsigned domain; None = symmetric
    mins: torch.Tensor | None = None  # float [N, K/group_size] (u * s + m form)
    perm: torch.Tensor | None = None  # int64 [K] input column order (GPTQ act-order)
    packing: str = "rows"  # "rows": qweight [N, K*bits/8] row-major; "tiles16": see pack_tiles

    @property
    def layout(self) -> str:
        return LAYOUTS[self.bits]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.scales.shape[0], self.in_features)

    @property
    def device(self) -> torch.device:
        return self.qweight.device

    def nbytes(self) -> int:
        ts = [self.qweight, self.scales, self.zeros, self.mins, self.perm]
        return sum(t.numel() * t.element_size() for t in ts if t is not None)

    def to(self, device) -> "QuantWeight":
        """Move to a device; scales keep the checkpoint's precision (the GEMM casts as it reads)."""
        def mv(t):
            return None if t is None else t.to(device=device).contiguous()
        return replace(self, qweight=mv(self.qweight), scales=mv(self.scales), zeros=mv(self.zeros),
                       mins=mv(self.mins), perm=mv(self.perm))


def unpack_codes(qweight: torch.Tensor, bits: int) -> torch.Tensor:
    """Packed uint8 -> unsigned codes uint8 [N, K] (row packing)."""
    if bits == 8:
        return qweight
    lo, hi = qweight & 0x0F, qweight >> 4
    return torch.stack([lo, hi], dim=-1).reshape(qweight.shape[0], -1)  # [N, K]


def codes_of(w: "QuantWeight") -> torch.Tensor:
    """The unsigned codes uint8 [N, K] of ``w`` in packed column order, whatever its packing."""
    codes = unpack_codes(w.qweight, w.bits)
    if w.packing == "tiles16":
        codes = untile_codes(codes, w.bits, w.scales.shape[0], w.in_features)
    return codes


TILE_ROWS = 16


def tile_chunk(bits: int) -> int:
    """Input columns per 16-byte vector of one lane in the tiled packing: 64 (int4) or 32 (int8)."""
    return 64 if bits == 4 else 32


@lru_cache(maxsize=16)
def _tile_order(bits: int, device) -> torch.Tensor:
    """For one chunk of one tile, in the order the codes are stored: row * chunk + column of each code.

    Lane l = 4g + t of a warp reads 16 bytes: the A fragments (rows g and g + 8) of the mma.m16n8k16 steps
    of its chunk. Step s's k positions {2t, 2t+1, 2t+8, 2t+9} are the columns 32*(s//2) + 8t + 4*(s%2)
    + {0, 1, 2, 3} (int4; int8: 8t + 4s + ...), so a lane's activations are 8 consecutive columns (one
    16-byte load) and every 32 columns belong to one group when group_size % 32 == 0. int4: one 32-bit
    word per step, nibbles (rows g, g+8, g, g+8, ...) x (cols +0, +0, +2, +2, +1, +1, +3, +3), so that
    (w & 0x000F000F) and its shifts by 4, 8, 12 give the pairs of the four A registers. int8: two words
    per step, bytes (g, +0), (g, +1), (g+8, +0), (g+8, +1), then the same for +2, +3.
    """
    order = []
    for lane in range(32):
        g, t = divmod(lane, 4)
        if bits == 4:
            for s in range(4):
                for i in range(8):
                    j = (i // 2 % 2) * 2 + i // 4
                    order.append((g + 8 * (i % 2)) * 64 + 32 * (s // 2) + 8 * t + 4 * (s % 2) + j)
        else:
            for s in range(2):
                for wd in range(2):
                    for b in range(4):
                        order.append((g + 8 * (b // 2)) * 32 + 8 * t + 4 * s + 2 * wd + b % 2)
    return torch.tensor(order, dtype=torch.int64, device=device)


def tile_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes [N, K] -> the tiled packing, uint8 [ceil(N/16)*16, K*bits/8] (rows padded with 0)."""
    n, k = codes.shape
    ch = tile_chunk(bits)
    if k % ch:
        raise NinferError(f"The tiled int{bits} packing needs the input size to be a multiple of {ch}.")
    tiles = -(-n // TILE_ROWS)
    c = torch.zeros(tiles * TILE_ROWS, k, dtype=torch.uint8, device=codes.device)
    c[:n] = codes
    c = c.view(tiles, TILE_ROWS, k // ch, ch).permute(0, 2, 1, 3).reshape(tiles, k // ch, TILE_ROWS * ch)
    c = c[..., _tile_order(bits, codes.device)]
    return pack_codes(c.reshape(tiles * TILE_ROWS, k), bits)


def untile_codes(codes: torch.Tensor, bits: int, n: int, k: int) -> torch.Tensor:
    """Inverse of :func:`tile_codes` on unpacked codes [N_pad, K] -> [n, K]."""
    ch = tile_chunk(bits)
    tiles = codes.shape[0] // TILE_ROWS
    out = torch.empty(tiles, k // ch, TILE_ROWS * ch, dtype=codes.dtype, device=codes.device)
    out[..., _tile_order(bits, codes.device)] = codes.reshape(tiles, k // ch, TILE_ROWS * ch)
    out = out.view(tiles, k // ch, TILE_ROWS, ch).permute(0, 2, 1, 3).reshape(tiles * TILE_ROWS, k)
    return out[:n]


def pack_tiles(w: "QuantWeight") -> "QuantWeight":
    """``w`` with its codes in the tiled packing (a new QuantWeight sharing scales, zeros, mins, perm)."""
    if w.packing == "tiles16":
        return w
    return replace(w, qweight=tile_codes(unpack_codes(w.qweight, w.bits)[:, : w.in_features], w.bits),
                   packing="tiles16")


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes (any int dtype) [N, K] -> packed uint8."""
    codes = codes.to(torch.uint8)
    if bits == 8:
        return codes.contiguous()
    if codes.shape[-1] % 2:
        raise NinferError("An int4 weight needs an even number of input columns; quantise it to int8 instead.")
    pairs = codes.reshape(codes.shape[0], -1, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()  # [N, K/2]


def dequantize(w: QuantWeight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The float weight [N, K] in packed column order (perm not applied).

    Computed in float32 and rounded once to ``dtype``: for checkpoints whose scales are bf16/fp16
    and ``dtype`` equal to the scale dtype, this is bit-identical to computing in that dtype
    (the product of two short mantissas is exact in float32).
    """
    codes = codes_of(w)
    n, k = codes.shape[0], w.in_features
    g = w.group_size
    u = codes[:, :k].float().view(n, k // g, g)  # [N, G, g]
    s = w.scales.float().unsqueeze(-1)  # [N, G, 1]
    if w.mins is not None:
        out = s * u + w.mins.float().unsqueeze(-1)
    else:
        z = float(1 << (w.bits - 1)) if w.zeros is None else w.zeros.float().unsqueeze(-1)
        out = (u - z) * s
    return out.view(n, k).to(dtype)


def linear(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Reference GEMM for grouped int layouts: y = x @ dequant(W)^T (+ b). x: [..., K] -> [..., N]."""
    if w.perm is not None:
        x = x.index_select(-1, w.perm)
    return torch.nn.functional.linear(x, dequantize(w, x.dtype), bias)


def group_for(in_features: int, group_size: int) -> int | None:
    """``group_size`` when it divides the input size, else the largest smaller power of two >= 16
    that does (SmolLM2's hidden size 576 takes group 64 under --group-size 128), else None."""
    g = group_size
    while g >= 16:
        if in_features % g == 0:
            return g
        g //= 2
    return None


def quantize_rtn(weight: torch.Tensor, bits: int, group_size: int, symmetric: bool = True,
                 scale_dtype: torch.dtype = torch.float16) -> QuantWeight:
    """Round-to-nearest groupwise quantisation (the compressed-tensors min-max observer's formulas).

    Symmetric: s = absmax / ((2**bits - 1) / 2), codes centred on 2**(bits-1). Asymmetric: s = (max - min)
    / (2**bits - 1) with an integer zero point; 0.0 is always representable.
    """
    n, k = weight.shape
    if k % group_size:
        raise NinferError(f"Input size {k} is not a multiple of the group size {group_size}; pick a group size "
                          "that divides every layer's input size (e.g. 32).")
    w = weight.float().view(n, k // group_size, group_size)  # [N, G, g]
    qmax = (1 << bits) - 1
    mid = 1 << (bits - 1)
    lo = w.amin(-1).clamp(max=0)
    hi = w.amax(-1).clamp(min=0)
    if symmetric:
        s = (torch.maximum(lo.abs(), hi) / (qmax / 2)).to(scale_dtype)
        s = torch.where(s == 0, torch.finfo(scale_dtype).eps, s)
        z = torch.full_like(lo, float(mid))
    else:
        s = ((hi - lo) / qmax).to(scale_dtype)
        s = torch.where(s == 0, torch.finfo(scale_dtype).eps, s)
        z = torch.clamp(torch.round(-lo / s.float()), 0, qmax)
    codes = torch.clamp(torch.round(w / s.float().unsqueeze(-1)) + z.unsqueeze(-1), 0, qmax)
    return QuantWeight(pack_codes(codes.view(n, k), bits), s, bits, group_size, k,
                       zeros=None if symmetric else z.to(torch.uint8))


def cat_rows(parts: list[QuantWeight]) -> QuantWeight | None:
    """Stack weights on the output dim (q|k|v, gate|up); None when their formats differ."""
    if len(parts) == 1:
        return parts[0]
    a = parts[0]
    if a.packing != "rows":
        return None
    for p in parts[1:]:
        same = (p.bits, p.group_size, p.in_features, p.scales.dtype) == (a.bits, a.group_size, a.in_features,
                                                                         a.scales.dtype)
        same = same and (p.zeros is None) == (a.zeros is None) and (p.mins is None) == (a.mins is None)
        same = same and p.packing == a.packing == "rows"
        same = same and ((p.perm is None and a.perm is None) or
                         (p.perm is not None and a.perm is not None and torch.equal(p.perm, a.perm)))
        if not same:
            return None

    def cat(ts):
        return None if ts[0] is None else torch.cat(ts, dim=0)
    zeros = [p.zeros for p in parts]
    if zeros[0] is not None:
        zeros = [z.to(torch.int16) for z in zeros] if any(z.dtype != zeros[0].dtype for z in zeros) else zeros
    return QuantWeight(cat([p.qweight for p in parts]), cat([p.scales for p in parts]), a.bits, a.group_size,
                       a.in_features, zeros=cat(zeros), mins=cat([p.mins for p in parts]), perm=a.perm)


def cat_rows_shared(parts: list[QuantWeight]) -> tuple[QuantWeight, list[QuantWeight]] | None:
    """Stack weights on the output dim into one weight and return it with each part as a view of its rows (no second
    copy: the caller swaps its parts for the views). Row or tiled packing alike; for the tiled packing every part's
    rows must be whole tiles (a multiple of 16). None when the formats differ or the rows do not split."""
    a = parts[0]
    if a.packing not in ("rows", "tiles16") or any(p.packing != a.packing for p in parts):
        return None
    if a.packing == "tiles16" and any(p.scales.shape[0] % TILE_ROWS for p in parts):
        return None
    whole = cat_rows([replace(p, packing="rows") for p in parts])
    if whole is None:
        return None
    whole.packing = a.packing
    views, r = [], 0
    for p in parts:
        n = p.scales.shape[0]

        def rows(t, n=n, r=r):
            return None if t is None else t[r:r + n]
        views.append(replace(whole, qweight=rows(whole.qweight), scales=rows(whole.scales), zeros=rows(whole.zeros),
                             mins=rows(whole.mins)))
        r += n
    return whole, views
