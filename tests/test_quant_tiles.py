"""The tiled packing of quantised weights (layout.pack_tiles) and the tensor-core GEMV that reads it.

Without a GPU: the tiling round-trips, dequantize reads either packing, and a NumPy emulation of
``qmma`` in kernels/qgemv.cu (the bit tricks that turn codes into fp16/bf16 (u - z), the mma.m16n8k16
fragment layouts as the PTX ISA defines them, the per-group float32 scaling) run on the packed bytes
gives x @ dequant(W)^T. The GPU test (tests/gpu/test_quant_kernels.py) checks the real kernel.
"""

import numpy as np
import pytest
import torch

from ninfer.quant import gpu
from ninfer.quant.layout import (
    QuantWeight,
    codes_of,
    dequantize,
    pack_tiles,
    quantize_rtn,
    tile_codes,
    unpack_codes,
    untile_codes,
)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("n", [16, 40])
def test_tiles_round_trip(bits, n):
    k = 192 if bits == 8 else 256
    codes = torch.randint(0, 1 << bits, (n, k), dtype=torch.uint8)
    packed = tile_codes(codes, bits)
    assert packed.shape == (-(-n // 16) * 16, k * bits // 8)
    assert torch.equal(untile_codes(unpack_codes(packed, bits), bits, n, k), codes)


@pytest.mark.parametrize("bits,sym", [(4, True), (4, False), (8, False)])
def test_dequantize_reads_tiled_packing(bits, sym):
    torch.manual_seed(0)
    q = quantize_rtn(torch.randn(24, 128), bits, 32, sym)
    t = pack_tiles(q)
    assert t.packing == "tiles16" and q.packing == "rows" and t.shape == q.shape == (24, 128)
    assert torch.equal(codes_of(t), unpack_codes(q.qweight, bits))
    assert torch.equal(dequantize(t), dequantize(q))


def test_tile_params_pair_rows_g_and_g_plus_8():
    torch.manual_seed(0)
    q = quantize_rtn(torch.randn(20, 128), 4, 64, symmetric=False)
    s, z = gpu.tile_params(q)
    assert s.shape == (2, 2, 8) and z.shape == (2, 2, 8)
    sb = q.scales.view(torch.int16).to(torch.int64) & 0xFFFF
    for tile, gi, g in [(0, 0, 0), (0, 1, 7), (1, 0, 3)]:
        lo = int(s[tile, gi, g]) & 0xFFFF
        hi = (int(s[tile, gi, g]) >> 16) & 0xFFFF
        assert lo == int(sb[16 * tile + g, gi])
        assert hi == (int(sb[16 * tile + g + 8, gi]) if 16 * tile + g + 8 < 20 else 0)
        assert int(z[tile, gi, g]) & 0xFF == int(q.zeros[16 * tile + g, gi])


# ---- NumPy emulation of the kernel, lane by lane ----------------------------------------------------------

def _prmt(x, y, sel):
    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.uint32), np.asarray(y, dtype=np.uint32))
    b = np.stack([(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)])
    return sum(b[(sel >> (4 * i)) & 7].astype(np.uint64) << (8 * i) for i in range(4)).astype(np.uint32)


def _halves(u, dt):
    """uint32 array -> (low, high) values of two 16-bit floats, as float64."""
    lo, hi = (u & 0xFFFF).astype(np.uint16), (u >> 16).astype(np.uint16)
    if dt == "f16":
        return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)
    return ((lo.astype(np.uint32) << 16).view(np.float32).astype(np.float64),
            (hi.astype(np.uint32) << 16).view(np.float32).astype(np.float64))


def _pack(lo, hi, dt):
    def bits(v):
        if dt == "f16":
            return v.astype(np.float16).view(np.uint16).astype(np.uint32)
        f = v.astype(np.float32)
        assert np.all(f.view(np.uint32) & 0xFFFF == 0)  # exact in bf16
        return f.view(np.uint32) >> 16
    return bits(lo) | (bits(hi) << 16)


def _x2_sub(a, b, dt):
    (a0, a1), (b0, b1) = _halves(a, dt), _halves(b, dt)
    return _pack(a0 - b0, a1 - b1, dt)


def _x2_fma(a, b, c, dt):
    (a0, a1), (b0, b1), (c0, c1) = _halves(a, dt), _halves(b, dt), _halves(c, dt)
    return _pack(a0 * b0 + c0, a1 * b1 + c1, dt)


def _deq(words, zg, zg8, dt, bits):
    """A fragment registers (4 uint32 per lane) of one mma step, as the kernel's QmDeq computes them."""
    if bits == 4 and dt == "f16":
        x = words[0]
        x8 = x >> 8
        cz = ((0x6400 | zg) * 0x10001).astype(np.uint32)
        m8 = np.float16(-64.0) - zg8.astype(np.float16)
        m8 = (m8.view(np.uint16).astype(np.uint32) * 0x10001).astype(np.uint32)
        return [_x2_sub((x & 0x000F000F) | 0x64006400, cz, dt),
                _x2_fma((x & 0x00F000F0) | 0x64006400, np.uint32(0x2C002C00), m8, dt),
                _x2_sub((x8 & 0x000F000F) | 0x64006400, cz, dt),
                _x2_fma((x8 & 0x00F000F0) | 0x64006400, np.uint32(0x2C002C00), m8, dt)]
    if bits == 4:
        x = words[0]
        n0, n8 = ((0xC300 | zg) * 0x10001).astype(np.uint32), ((0xC300 | zg8) * 0x10001).astype(np.uint32)
        one = np.uint32(0x3F803F80)
        return [_x2_fma(((x >> sh) & 0x000F000F) | 0x43004300, one, nz, dt)
                for sh, nz in ((0, n0), (4, n8), (8, n0), (12, n8))]
    if dt == "f16":
        c0, c8 = ((0x6400 | zg) * 0x10001).astype(np.uint32), ((0x6400 | zg8) * 0x10001).astype(np.uint32)
        return [_x2_sub(_prmt(words[0], 0x64646464, 0x4140), c0, dt),
                _x2_sub(_prmt(words[0], 0x64646464, 0x4342), c8, dt),
                _x2_sub(_prmt(words[1], 0x64646464, 0x4140), c0, dt),
                _x2_sub(_prmt(words[1], 0x64646464, 0x4342), c8, dt)]

    def pair(w, z, lo):
        f = [(_prmt(w, 0x4B000000, 0x7440 | (lo + i)).view(np.float32) - (np.float32(8388608.0) + z.astype(
            np.float32))).astype(np.float32) for i in (0, 1)]
        return _prmt(f[0].view(np.uint32), f[1].view(np.uint32), 0x7632)
    return [pair(words[0], zg, 0), pair(words[0], zg8, 2), pair(words[1], zg, 0), pair(words[1], zg8, 2)]


def _raw(words, zg, zg8, dt, bits):
    """QmDeq::raw and QmDeq::neg: offset codes (exact) and the constant fragment -(offset + z); with the
    factor of row g + 8's scale (fp16 int4: 1/16). None where the kernel has no raw form (bf16 int8)."""
    if bits == 8 and dt == "bf16":
        return None
    if bits == 4 and dt == "f16":
        x = words[0]
        x8 = x >> 8
        raw = [(x & 0x000F000F) | 0x64006400, (x & 0x00F000F0) | 0x64006400,
               (x8 & 0x000F000F) | 0x64006400, (x8 & 0x00F000F0) | 0x64006400]
        n0 = ((0x6400 | zg) * 0x10001).astype(np.uint32) | np.uint32(0x80008000)
        n8 = (np.float16(-1024.0) - np.float16(16.0) * zg8.astype(np.float16)).view(np.uint16).astype(np.uint32)
        return raw, [n0, (n8 * 0x10001).astype(np.uint32)] * 2, 1 / 16
    if bits == 4:
        x = words[0]
        raw = [((x >> sh) & 0x000F000F) | 0x43004300 for sh in (0, 4, 8, 12)]
        return raw, [((0xC300 | zg) * 0x10001).astype(np.uint32), ((0xC300 | zg8) * 0x10001).astype(np.uint32)] * 2, 1.0
    raw = [_prmt(words[0], 0x64646464, 0x4140), _prmt(words[0], 0x64646464, 0x4342),
           _prmt(words[1], 0x64646464, 0x4140), _prmt(words[1], 0x64646464, 0x4342)]
    n0 = ((0x6400 | zg) * 0x10001).astype(np.uint32) | np.uint32(0x80008000)
    n8 = ((0x6400 | zg8) * 0x10001).astype(np.uint32) | np.uint32(0x80008000)
    return raw, [n0, n8] * 2, 1.0


def _a_matrix(a, dt, g, t):
    A = np.zeros((16, 16))
    for r in range(4):  # a[r]: row g + 8 (r % 2), cols 2t + 8 (r // 2) + (0, 1)
        lo, hi = _halves(np.asarray(a[r], dtype=np.uint32) * np.ones(32, dtype=np.uint32), dt)
        A[g + 8 * (r % 2), 2 * t + 8 * (r // 2)] = lo
        A[g + 8 * (r % 2), 2 * t + 8 * (r // 2) + 1] = hi
    return A


def emulate_qmma(w: QuantWeight, x: torch.Tensor, dt: str, sdt: str, raw: bool = False) -> np.ndarray:
    """y [T, N] (float64) as the qmma kernel computes it from the tiled bytes, T <= 16; ``raw``: as the
    -DQM_RAW build does for T <= 8 (offset codes, then a second mma by the constant fragment)."""
    n, k = w.shape
    bits, G = w.bits, w.group_size
    ch = 64 if bits == 4 else 32
    T = x.shape[0]
    sp, zp = gpu.tile_params(w)
    sp, zp = sp.numpy().view(np.uint32), None if zp is None else zp.numpy()
    xb = x.view(torch.int16).numpy().view(np.uint16).astype(np.uint32)  # [T, K] raw 16-bit
    W32 = w.qweight.numpy().reshape(-1).view(np.uint32).reshape(-1, k // ch, 32, 4)  # [tiles, chunk, lane, word]
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    y = np.zeros((T, W32.shape[0] * 16))
    for tile in range(W32.shape[0]):
        acc = np.zeros((16, 16))  # [row, token]
        s8 = None
        for c in range(k // ch):
            words = [W32[tile, c, :, i] for i in range(4)]
            tmp = np.zeros((16, 16))
            for h in range(ch // 32):
                kk = c * ch + 32 * h
                gi = kk // G
                if zp is None:
                    zz = np.full(32, 0x0808 if bits == 4 else 0x8080, dtype=np.uint32)
                else:
                    zz = zp.view(np.uint16)[tile, gi, g].astype(np.uint32)
                for s2 in range(2):
                    wd = words[2 * h + s2:] if bits == 4 else words[2 * s2:]
                    rw = _raw(wd, zz & 0xFF, zz >> 8, dt, bits) if raw and T <= 8 else None  # one token set
                    if rw is None:
                        As = [_a_matrix(_deq(wd, zz & 0xFF, zz >> 8, dt, bits), dt, g, t)]
                    else:
                        As = [_a_matrix(rw[0], dt, g, t), _a_matrix(rw[1], dt, g, t)]
                        s8 = rw[2]
                    for tset in range((T + 7) // 8):
                        tok = np.minimum(g + 8 * tset, T - 1)
                        xv = np.stack([xb[tok[i], kk + 8 * t[i]: kk + 8 * t[i] + 8] for i in range(32)])
                        bw = [xv[:, 2 * j] | (xv[:, 2 * j + 1] << 16) for j in range(4)]
                        B = np.zeros((16, 8))
                        for r in range(2):  # b[r]: rows 2t + 8r + (0, 1), column g
                            lo, hi = _halves(bw[2 * s2 + r], dt)
                            B[2 * t + 8 * r, g] = lo
                            B[2 * t + 8 * r + 1, g] = hi
                        for A in As:  # the mma adds exact products in float32 (float64 here)
                            tmp[:, 8 * tset: 8 * tset + 8] += A @ B
                if h == ch // 32 - 1 or G % ch:
                    s_lo, s_hi = _halves(sp[tile, gi, :], sdt)  # rows 0..7, rows 8..15
                    s_rows = np.concatenate([s_lo, s_hi * (s8 if s8 is not None else 1.0)])
                    acc += s_rows[:, None] * tmp
                    tmp[:] = 0
        y[:, 16 * tile: 16 * tile + 16] = acc[:, :T].T
    return y[:, :n]


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("bits,group,sym", [(4, 128, True), (4, 32, False), (4, 64, False), (8, 32, True),
                                            (8, 64, False)])
@pytest.mark.parametrize("tokens,raw", [(1, False), (3, True), (11, False), (11, True)])
def test_emulated_kernel_equals_reference(dt, bits, group, sym, tokens, raw):
    torch.manual_seed(bits * 100 + group + tokens)
    n, k = 40, 256
    sdt = torch.float16 if dt == "f16" else torch.bfloat16
    w = pack_tiles(quantize_rtn(torch.randn(n, k) * 0.05, bits, group, sym, scale_dtype=sdt))
    x = torch.randn(tokens, k).to(sdt)
    ref = x.double() @ dequantize(w, torch.float64).t()
    y = emulate_qmma(w, x, dt, dt, raw)
    assert np.abs(y - ref.numpy()).max() / np.abs(ref.numpy()).max() < 1e-6


@pytest.mark.parametrize("group", [32, 64, 96, 128, 160, 4096])
def test_group_index_by_float_reciprocal_is_exact(group):
    """qm_group in kernels/qgemv.cu: floor(kk / (G / 32)) as float32 (kk + 0.5) * (32 / G), rounded to zero."""
    kk = np.arange(0, 1 << 16, dtype=np.int64)  # K up to 2M
    rg = np.float32(32.0) / np.float32(group)
    got = ((kk.astype(np.float32) + np.float32(0.5)) * rg).astype(np.float32).astype(np.int64)
    assert np.array_equal(got, kk // (group // 32))


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("tiled", [False, True])
def test_cat_rows_shared_joins_and_views(bits, tiled):
    """layout.cat_rows_shared (what a Gated DeltaNet layer does to in_proj | in_proj_ba): one weight whose codes,
    scales and zero points are the parts' stacked, and each part a view of its rows that dequantises to the part;
    the tiled packing joins whole tiles only; formats that differ do not join."""
    from ninfer.quant.layout import cat_rows_shared

    torch.manual_seed(bits)
    parts = [quantize_rtn(torch.randn(n, 256), bits, 64, symmetric=False) for n in (48, 32)]
    if tiled:
        parts = [pack_tiles(p) for p in parts]
    whole, views = cat_rows_shared(parts)
    assert whole.packing == parts[0].packing and whole.shape == (80, 256)
    assert torch.equal(dequantize(whole), torch.cat([dequantize(p) for p in parts]))
    for p, v in zip(parts, views):
        assert torch.equal(dequantize(v), dequantize(p)) and torch.equal(codes_of(v), codes_of(p))
    assert views[0].qweight.data_ptr() == whole.qweight.data_ptr()
    assert views[1].scales.data_ptr() == whole.scales[48:].data_ptr()
    assert views[1].zeros.data_ptr() == whole.zeros[48:].data_ptr()
    other = quantize_rtn(torch.randn(32, 256), bits, 128, symmetric=False)  # another group size
    assert cat_rows_shared([parts[0], pack_tiles(other) if tiled else other]) is None
    if tiled:  # 40 rows are not whole tiles
        assert cat_rows_shared([parts[0], pack_tiles(quantize_rtn(torch.randn(40, 256), bits, 64, False))]) is None
        assert cat_rows_shared([parts[0], quantize_rtn(torch.randn(32, 256), bits, 64, False)]) is None  # mixed
