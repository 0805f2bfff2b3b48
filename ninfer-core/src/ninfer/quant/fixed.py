"""The 16-bit fixed-point form of one token's activations that the int4 and int8 one-token GEMVs multiply on the
integer tensor cores (qgemv.cu ``qmv1f*``): made by the norm before the GEMV (fused.cuh ``add_rms_norm`` with
``fixed=True``) and attached to the normed row, so the GEMV reads bytes instead of converting each code to bf16 or fp16.
Where no op writes it (down, lm_head), ``qmv1x`` makes the same form per burst from the row in the warp that uses it
(``gpu.QMV1X``).

Per group of 128 values: ``sx = max |x| / 32512`` (1 for a zero group), ``q = rint(x * (1 / sx))`` (the reciprocal
rounded to float32, the product exact, rounded once, ties to even: one FMA in the kernels, fixed_point.cuh), so
``x ~ sx q`` with ``|q| <= 32512``; ``q = 256 hi + lo`` with ``hi = floor((q + 128) / 256)`` and ``lo`` in
[-128, 127], both signed bytes. ``xq`` int8 [2, K]: hi then lo, in the order of :func:`k_order`, the k a lane of
the tiled int4 packing holds (ninfer.quant.layout.pack_tiles; the int8 GEMV puts its codes in the same order, one
byte permute a register); ``xg`` int32 [K / 128, 2]: sx's float32 bits and
the sum of the group's q (for the zero point). The relative error of a value is at most 2^-16 of its group's
largest, against bf16's own 2^-9 of itself.
"""

from __future__ import annotations

import torch

FIXED_ATTR = "_ninfer_fixed"  # the attribute of a normed row [1, K] holding (xq, xg)
GROUP = 128
QMAX = 127 * 256


def k_order(k: int, device=None) -> torch.Tensor:
    """xq's k index, flat: [K / 64 chunks, 4 lanes t, 4 words i, 4 bytes j] = 64 c + 32 (i >> 1) + 8 t + 4 (i & 1)
    + (0, 2, 1, 3)[j]."""
    c = torch.arange(k // 64, device=device).view(-1, 1, 1, 1)
    t = torch.arange(4, device=device).view(1, -1, 1, 1)
    i = torch.arange(4, device=device).view(1, 1, -1, 1)
    j = torch.tensor((0, 2, 1, 3), device=device).view(1, 1, 1, -1)
    return (64 * c + 32 * (i >> 1) + 8 * t + 4 * (i & 1) + j).flatten()


def fixed_point(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token x (K values, K % 128 == 0) -> (xq, xg) as above; the reference of the norm kernel's output."""
    xf = x.float().reshape(-1, GROUP)
    m = xf.abs().amax(-1, keepdim=True)
    sx = torch.where(m > 0, m / torch.full_like(m, QMAX), torch.ones_like(m))  # (a true division, as the kernel's)
    inv = torch.ones_like(sx) / sx  # float32, correctly rounded, as __frcp_rn
    q = torch.round(xf.double() * inv.double()).to(torch.int32)  # the product of two floats is exact in float64
    hi = torch.div(q + 128, 256, rounding_mode="floor")
    lo = q - 256 * hi
    order = k_order(x.numel(), x.device)
    xq = torch.stack([hi.flatten()[order], lo.flatten()[order]]).to(torch.int8)
    xg = torch.stack([sx.flatten().view(torch.int32), q.sum(-1).to(torch.int32)], -1)
    return xq, xg


def dequantize(xq: torch.Tensor, xg: torch.Tensor) -> torch.Tensor:
    """(xq, xg) -> the float32 values sx q they stand for, in k order."""
    k = xq.shape[-1]
    q = torch.empty(k, dtype=torch.int32, device=xq.device)
    q[k_order(k, xq.device)] = 256 * xq[0].int() + xq[1].int()
    return (q.view(-1, GROUP).float() * xg[:, 0].view(torch.float32).view(-1, 1)).flatten()


def version_of(x: torch.Tensor) -> int | None:
    """x's version counter (in-place changes count up), None for an inference-mode tensor, which has none."""
    return None if x.is_inference() else x._version


def attach(x: torch.Tensor, xq: torch.Tensor, xg: torch.Tensor) -> torch.Tensor:
    """x with its form (xq, xg) attached (the norm's launcher does this; tests and benchmarks with the reference's
    form); a later in-place change of x makes it stale."""
    setattr(x, FIXED_ATTR, (xq, xg, version_of(x)))
    return x


def attached(x: torch.Tensor):
    """(xq, xg) as the norm attached them to x, or None, also where x has changed in place since (as far as its
    version counter tells: an inference-mode tensor has none, and nothing in the model changes a normed row)."""
    f = getattr(x, FIXED_ATTR, None)
    if f is None or (f[2] is not None and f[2] != version_of(x)):
        return None
    return f[0], f[1]


def carried(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y, a reshaped view of x (the same values in the same order), with x's form attached where x has one: a
    kernel attaches it to the [T, H, D] output that a layer then flattens for its projection."""
    f = attached(x)
    if f is not None and y.data_ptr() == x.data_ptr() and y.numel() == x.numel() and y.is_contiguous():
        attach(y, *f)
    return y


def serves_output(w) -> bool:
    """Whether a mixer's output projection ``w`` takes the form from the op before it (``serves``, and
    NINFER_QMV1F_OUT not 0)."""
    from . import gpu

    return gpu.QMV1F_OUT and serves(w)


def serves(w) -> bool:
    """Whether a one-token GEMV by ``w`` takes the fixed-point form (an int4 weight, or an int8 one unless
    NINFER_QMV1F_INT8=0, in the tiled packing on a GPU, groups of whole 128-k runs, no column permutation; NINFER_QMV1F
    not 0): the norms before it then make it."""
    from . import gpu
    from .layout import QuantWeight

    return isinstance(w, QuantWeight) and gpu.QMV1F and gpu.fixed_kernels_serve(w) and w.qweight.is_cuda
