"""ninfer.quant.fixed: the 16-bit fixed-point form of one token that the int4 and int8 one-token GEMVs multiply on
the integer tensor cores. Checked here on the CPU against the tiled int4 and int8 packings (pack_tiles) and against
the float product: the GPU kernels' own tests are in tests/gpu/test_quant_kernels.py."""

import pytest
import torch

from ninfer.quant import fixed
from ninfer.quant.layout import QuantWeight, codes_of, dequantize, pack_tiles, quantize_rtn


def _codes_as_read(w: QuantWeight) -> torch.Tensor:
    """The int4 codes [N, K] as the fixed-point kernel reads the tiled packing: the low nibble of byte j of a lane's
    word i is row g's code, the high nibble row g + 8's, at k_order's k (lane (g, t) of each tile and 64-k chunk)."""
    n, k = w.scales.shape[0], w.in_features
    packed = pack_tiles(w).qweight.view(-1, k // 64, 8, 4, 4, 4).long()  # tiles, chunks, g, t, word i, byte j
    order = fixed.k_order(k).view(k // 64, 4, 4, 4)  # chunk, t, i, j
    got = torch.full((packed.shape[0] * 16, k), -1, dtype=torch.int64)
    for g in range(8):
        for t in range(4):
            ks = order[:, t].reshape(-1)
            by = packed[:, :, g, t].reshape(packed.shape[0], -1)
            got[g::16][:, ks] = by & 15
            got[g + 8::16][:, ks] = by >> 4
    return got[:n]


def test_k_order_is_the_k_each_lane_holds_in_the_tiled_int4_packing():
    """Read as the kernel reads it, the tiled packing gives back the codes it was made from."""
    n, k = 48, 512
    torch.manual_seed(0)
    w = QuantWeight(torch.randint(0, 256, (n, k // 2), dtype=torch.uint8), torch.ones(n, k // 128).half(), 4, 128, k)
    assert torch.equal(_codes_as_read(w), codes_of(w)[:, :k].long())
    assert torch.equal(fixed.k_order(k).sort().values, torch.arange(k))


def _byte_perm(a: torch.Tensor, b: torch.Tensor, sel: int) -> torch.Tensor:
    """CUDA's __byte_perm on bytes [..., 4] (a bytes 0-3, b bytes 4-7): byte n of the result is byte (sel >> 4 n) & 7."""
    src = torch.cat([a, b], -1)
    return src[..., [(sel >> (4 * n)) & 7 for n in range(4)]]


def _int8_codes_as_read(w: QuantWeight) -> torch.Tensor:
    """The int8 codes [N, K] as qgemv.cu's FIX8 reads the tiled packing: lane (g, t) of int8 chunk c = 2 C + e holds
    words x, y, z, w; A registers PRMT(x, y, 0x5140) (row g) and PRMT(x, y, 0x7362) (row g + 8) meet the form's word
    2 e of 64-k chunk C, PRMT(z, w, ...) its word 2 e + 1, byte j at k_order's k."""
    n, k = w.scales.shape[0], w.in_features
    packed = pack_tiles(w).qweight.view(-1, k // 64, 2, 8, 4, 4, 4).long()  # tiles, C, e, g, t, word, byte
    order = fixed.k_order(k).view(k // 64, 4, 4, 4)  # C, t, word i, byte j
    got = torch.full((packed.shape[0] * 16, k), -1, dtype=torch.int64)
    for g in range(8):
        for t in range(4):
            for e in range(2):
                wd = packed[:, :, e, g, t]  # [tiles, C, word, byte]
                for i, (lo, hi) in enumerate(((0, 1), (2, 3))):
                    ks = order[:, t, 2 * e + i]  # [C, byte j]
                    for row, sel in ((g, 0x5140), (g + 8, 0x7362)):
                        a = _byte_perm(wd[:, :, lo], wd[:, :, hi], sel)  # [tiles, C, byte j]
                        for c in range(k // 64):
                            got[row::16][:, ks[c]] = a[:, c]
    return got[:n]


def test_k_order_is_the_k_each_lane_holds_in_the_tiled_int8_packing_after_its_byte_permutes():
    """The int8 one-token GEMV on the integer tensor cores takes the int4 GEMV's form unchanged: read as its kernel
    reads the tiled int8 packing (one byte permute an A register), every byte is the code of the k the form's byte
    in the same place holds, so each IMMA multiplies matching k."""
    n, k = 40, 384
    torch.manual_seed(0)
    w = QuantWeight(torch.randint(0, 256, (n, k), dtype=torch.uint8), torch.ones(n, k // 128).half(), 8, 128, k)
    assert torch.equal(_int8_codes_as_read(w), codes_of(w)[:, :k].long())


@pytest.mark.parametrize("scale", [1e-3, 1.0, 300.0])
def test_fixed_point_form_bounds(scale):
    torch.manual_seed(1)
    x = torch.randn(1024) * scale
    x[::97] *= 50
    x[256:384] = 0  # a zero group
    xq, xg = fixed.fixed_point(x)
    assert xq.shape == (2, 1024) and xq.dtype == torch.int8 and xg.shape == (8, 2) and xg.dtype == torch.int32
    hi, lo = xq[0].int(), xq[1].int()
    assert hi.abs().max() <= 127 and lo.min() >= -128 and lo.max() <= 127
    sx = xg[:, 0].view(torch.float32)
    assert sx[2] == 1 and (xq[:, fixed.k_order(1024)[256:384]] == 0).all() and xg[2, 1] == 0
    back = fixed.dequantize(xq, xg)
    m = x.view(-1, 128).abs().amax(-1)
    assert torch.allclose(sx[m > 0], m[m > 0] / fixed.QMAX)
    assert ((back - x).abs().view(-1, 128) <= sx.view(-1, 1) * 0.5 * (1 + 1e-5)).all()  # half a step at most
    q = torch.empty(1024, dtype=torch.int32)
    q[fixed.k_order(1024)] = 256 * hi + lo
    assert torch.equal(q.view(-1, 128).sum(-1), xg[:, 1])


def _kernel_arithmetic(w, xq, xg):
    """What qmv1f computes, in exact integers then float64: per 128-k run of a tile row, 256 (u . hi) + (u . lo) -
    z sum(q), times the row's group scale and the run's sx; u from the tiled packing's nibbles at k_order's k."""
    n, k = w.scales.shape[0], w.in_features
    u = _codes_as_read(w)
    q = torch.empty(k, dtype=torch.int64)
    q[fixed.k_order(k)] = 256 * xq[0].long() + xq[1].long()
    dot = (u.view(n, -1, 128) * q.view(1, -1, 128)).sum(-1)  # [n, runs], exact
    z = (w.zeros.long() if w.zeros is not None else torch.full_like(w.scales, 8, dtype=torch.int64))
    runs = k // 128
    z = z.repeat_interleave(w.group_size // 128, dim=1)[:, :runs]
    s = w.scales.double().repeat_interleave(w.group_size // 128, dim=1)[:, :runs]
    v = dot - z * xg[:, 1].long().view(1, -1)
    return (v.double() * s * xg[:, 0].view(torch.float32).double().view(1, -1)).sum(-1)


@pytest.mark.parametrize("group,sym", [(128, True), (256, False)])
def test_the_kernels_integer_arithmetic_equals_the_float_product(group, sym):
    """The fixed-point GEMV's algebra (codes times hi and lo as exact integers, the zero point taken off through the
    run's sum of q, then the two scales) equals dequant(W) @ (sx q) in float64, and x @ dequant(W) within the form's
    rounding."""
    torch.manual_seed(2)
    n, k = 40, 512
    w = quantize_rtn(torch.randn(n, k) * 0.05, 4, group, symmetric=sym, scale_dtype=torch.float16)
    x = torch.randn(k)
    x[::37] *= 40
    xq, xg = fixed.fixed_point(x)
    got = _kernel_arithmetic(w, xq, xg)
    W = dequantize(w).double()
    exact = W @ fixed.dequantize(xq, xg).double()  # (sx q in float32: 2^-24 of each value)
    assert torch.allclose(got, exact, rtol=1e-6, atol=1e-6 * float(exact.abs().max()))
    want = W @ x.double()
    assert ((got - want).norm() / want.norm()) < 1e-4


def test_reference_norm_takes_fixed_and_attaches_nothing():
    from ninfer.reference import ops

    x, r, w = torch.randn(1, 256), torch.randn(1, 256), torch.rand(256)
    y, h = ops.add_rms_norm(x, r, w, 1e-6, False, fixed=True)
    y0, _ = ops.add_rms_norm(x, r, w, 1e-6, False)
    assert torch.equal(y, y0) and fixed.attached(y) is None


def test_an_attached_form_goes_stale_when_the_row_changes_in_place():
    x = torch.randn(1, 256)
    form = fixed.fixed_point(x.flatten())
    assert fixed.attached(x) is None
    fixed.attach(x, *form)
    got = fixed.attached(x)
    assert got is not None and got[0] is form[0] and got[1] is form[1]
    x.mul_(2.0)
    assert fixed.attached(x) is None  # the GEMV then takes the row itself
    with torch.inference_mode():  # no version counter there: the form is kept as attached
        y = fixed.attach(torch.randn(1, 256), *form)
        assert fixed.attached(y) is not None


def test_reference_ops_take_fixed_and_attach_nothing():
    """The mixers' last ops before their output projections take fixed=True on every backend; the reference's attach
    nothing (its quantised GEMV takes the row) and compute what they compute without it."""
    from ninfer.reference import gdn, ops

    x, gate = torch.randn(1, 2, 128), torch.randn(1, 2, 128)
    y = ops.sigmoid_mul(x, gate, fixed=True)
    assert torch.equal(y, ops.sigmoid_mul(x, gate)) and fixed.attached(y) is None
    q, k = torch.randn(1, 1, 128), torch.randn(1, 1, 128)
    v, z = torch.randn(1, 2, 128), torch.randn(1, 2, 128)
    g, beta, w = -torch.rand(1, 2), torch.rand(1, 2), torch.rand(128)
    s = torch.randn(2, 128, 128)
    o, st = gdn.gdn_recurrent_gated(q, k, v, g, beta, s, z, w, 1e-6, fixed=True)
    o0, st0 = gdn.gdn_recurrent_gated(q, k, v, g, beta, s, z, w, 1e-6)
    assert torch.equal(o, o0) and torch.equal(st, st0) and fixed.attached(o) is None


def test_a_form_is_carried_to_a_reshaped_view_only():
    """carried(x, y): a layer flattens a kernel's [T, H, D] output for its projection; the form goes with a view of
    the same values, not with a copy, nor from a row that has changed since."""
    x = torch.randn(1, 2, 128)
    form = fixed.fixed_point(x.flatten())
    fixed.attach(x, *form)
    flat = fixed.carried(x, x.reshape(1, 256))
    assert fixed.attached(flat) is not None and fixed.attached(flat)[0] is form[0]
    assert fixed.attached(fixed.carried(x, x.reshape(1, 256).clone())) is None
    assert fixed.attached(fixed.carried(x, x[:, :1].reshape(1, 128))) is None  # part of the values
    bare = torch.randn(1, 2, 128)
    assert fixed.attached(fixed.carried(bare, bare.reshape(1, 256))) is None
    x.add_(1.0)
    assert fixed.attached(fixed.carried(x, x.reshape(1, 256))) is None


def test_qmv1x_setting_names_weight_bits(monkeypatch):
    """NINFER_QMV1X: the weight bits whose one-token GEMVs make the form from their rows; a value naming none warns
    (one sentence with the values it takes) and keeps the default."""
    from ninfer.quant import gpu

    for v, want in (("4", {4}), ("8", {8}), ("4,8", {4, 8}), (" 8, 4 ", {4, 8}), ("all", {4, 8}), ("1", {4, 8}),
                    ("0", set()), ("off", set())):
        monkeypatch.setenv("NINFER_QMV1X", v)
        assert gpu._bits_env("NINFER_QMV1X", "4") == want, v
    monkeypatch.delenv("NINFER_QMV1X")
    assert gpu._bits_env("NINFER_QMV1X", "4") == {4}
    monkeypatch.setenv("NINFER_QMV1X", "int4")
    with pytest.warns(UserWarning, match="4, 8, 4,8, all or 0"):
        assert gpu._bits_env("NINFER_QMV1X", "4") == {4}
