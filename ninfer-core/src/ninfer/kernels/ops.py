"""Python launchers for the shared kernels, and the OpImpls a backend registers.

Each launcher checks what its kernel assumes (dtype, 16-byte alignment, contiguity) and otherwise
calls the reference op, so a kernel never sees input it was not written for. Nothing here syncs with
the host on the decode/verify path, so CUDA graphs capture it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..ops import DeviceSpec, OpImpl
from ..quant.fixed import attach
from ..reference import ops as ref
from . import gemv as _gemv
from .attention import make_paged_attention
from .fused import make_fused_ops
from .gdn import make_gdn_ops
from .gdn_gates import make_gdn_gates
from .library import DTYPE_SUFFIX, GEMV_WIDTHS, KernelLibrary

GEMV_MAX_TOKENS = GEMV_WIDTHS[-1]  # above this, cuBLAS (prefill)
ARGMAX_ONE_BLOCK = 8192  # rows up to this long: one block each; longer: blocks of ARGMAX_CHUNK values, then a merge
ARGMAX_CHUNK = 2048
ARGMAX_MAX_BLOCKS = 1024


def _aligned(*ts: torch.Tensor) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in ts)


def _width(ntok: int) -> int:
    return next(w for w in GEMV_WIDTHS if w >= ntok)


def make_ops(lib: KernelLibrary) -> dict:
    """The launchers for one backend's library, keyed by op name."""
    warps = lib.tuning("NINFER_GEMV_WARPS", 4)
    pairs = lib.tuning("NINFER_GEMV_PAIRS", 0) == 1
    mma = _gemv.MmaGemv(lib)

    def suffix(t: torch.Tensor):
        return DTYPE_SUFFIX.get(t.dtype) if t.is_cuda and t.dtype in lib.dtypes else None

    def linear(x, weight, bias=None):
        K, N = x.shape[-1], weight.shape[0]
        x2 = x.reshape(-1, K)  # [T, K]
        T, s = x2.shape[0], suffix(x)
        if (T > GEMV_MAX_TOKENS or T == 0 or s is None or weight.dtype != x.dtype or K % 8
                or not weight.is_contiguous() or (bias is not None and bias.dtype != x.dtype)):
            return F.linear(x, weight, bias)  # prefill: cuBLAS
        x2 = x2.contiguous()
        if not _aligned(x2, weight):
            return F.linear(x, weight, bias)
        if _gemv.mma_on():  # tensor cores, batch-invariant (NINFER_GEMV=mma)
            return mma(x2, weight, bias).view(*x.shape[:-1], N)
        if _gemv.cublas_for(T):  # 2..16 tokens: cuBLAS streams faster than either GEMV on the H200
            return F.linear(x, weight, bias)
        y = torch.empty(T, N, dtype=x.dtype, device=x.device)  # [T, N]
        rows_w, sk = _gemv.form(N, K, pairs) if T == 1 and warps % 4 == 0 else (1, 1)
        if rows_w == 2:
            groups = warps // sk
            lib.module(x.device)[f"gemv_{s}_t1_r2_k{sk}"](((N + 2 * groups - 1) // (2 * groups),), (warps * 32,),
                                                          weight, x2, bias, y, N, K)
            return y.view(*x.shape[:-1], N)
        if sk > 1:
            rows = warps // sk
            lib.module(x.device)[f"gemv_{s}_t1_k{sk}"](((N + rows - 1) // rows,), (warps * 32,),
                                                       weight, x2, bias, y, N, K)
            return y.view(*x.shape[:-1], N)
        nt = _width(T)
        lib.module(x.device)[f"gemv_{s}_t{nt}"](((N + warps - 1) // warps, (T + nt - 1) // nt), (warps * 32,),
                                                  weight, x2, bias, y, N, K, T)
        return y.view(*x.shape[:-1], N)

    def _norm(kernel, x, weight, eps, extra=None):
        H = x.shape[-1]
        x2 = x.reshape(-1, H)  # [rows, H]
        rows = x2.shape[0]
        y = torch.empty(rows, H, dtype=x.dtype, device=x.device)
        # short rows (per-head norms): a warp per row, 8 rows a block; long rows: a 16-byte vector a thread (up to
        # 1024 threads; rms_norm[_zc] are compiled for 1024, the gated norm, with z in registers too, takes 256)
        wide = 256 if extra is not None or "-DNINFER_NORM_TWO_PASS" in lib.options else 1024  # (common.cuh)
        block = (32, 8) if H <= 1024 else (min(wide, (H // 8 + 31) // 32 * 32), 1)
        grid = ((rows + block[1] - 1) // block[1],)
        if extra is None:
            lib.module(x.device)[kernel](grid, block, x2, weight, y, rows, H, x2.stride(0), float(eps))
        else:
            lib.module(x.device)[kernel](grid, block, x2, extra, weight, y, rows, H, float(eps))
        return y.view(x.shape)

    def _norm_ok(x, weight, s) -> bool:
        H = x.shape[-1]
        return (s is not None and weight.dtype == x.dtype and weight.is_contiguous() and H % 8 == 0
                and x.stride(-1) == 1 and x.numel() > 0)

    def rms_norm(x, weight, eps, zero_centered=False):
        s = suffix(x)
        if not _norm_ok(x, weight, s):
            return ref.rms_norm(x, weight, eps, zero_centered)
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(0) % 8 or not _aligned(x2, weight):
            return ref.rms_norm(x, weight, eps, zero_centered)
        return _norm(f"rms_norm_zc_{s}" if zero_centered else f"rms_norm_{s}", x2, weight, eps).view(x.shape)

    def rms_norm_gated(x, z, weight, eps):
        s = suffix(x)
        if not _norm_ok(x, weight, s) or z.dtype != x.dtype or z.shape != x.shape:
            return ref.rms_norm_gated(x, z, weight, eps)
        x, z = x.contiguous(), z.contiguous()
        if not _aligned(x, z, weight):
            return ref.rms_norm_gated(x, z, weight, eps)
        return _norm(f"rms_norm_gated_{s}", x, weight, eps, extra=z)

    def rope(q, k, positions, cos_sin):
        s = suffix(q)
        T, Hq, D = q.shape
        Hk = k.shape[1]
        if (s is None or k.dtype != q.dtype or cos_sin.dtype != torch.float32 or D > 1024 or T == 0
                or q.stride(2) != 1 or q.stride(1) != D or k.stride(2) != 1 or k.stride(1) != D):
            return ref.rope(q, k, positions, cos_sin)
        q_out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)  # [T, Hq, D]
        k_out = torch.empty(T, Hk, D, dtype=k.dtype, device=k.device)  # [T, Hk, D]
        pos = positions.to(torch.int64).contiguous()
        lib.module(q.device)[f"rope_{s}"]((T, Hq + Hk), ((D + 31) // 32 * 32,), q, k, q_out, k_out, pos,
                                          cos_sin.contiguous(), Hq, Hk, D, cos_sin.shape[-1], q.stride(0),
                                          k.stride(0))
        return q_out, k_out

    def silu_mul(x):
        s = suffix(x)
        I2 = x.shape[-1]
        if s is None or I2 % 16 or x.numel() == 0:
            return ref.silu_mul(x)
        x = x.contiguous()
        T = x.numel() // I2
        y = torch.empty(*x.shape[:-1], I2 // 2, dtype=x.dtype, device=x.device)  # [..., I]
        n = T * (I2 // 16)
        lib.module(x.device)[f"silu_mul_{s}"](((n + 255) // 256,), (256,), x, y, T, I2 // 2)
        return y

    def write_kv(k, v, k_cache, v_cache, slots):
        s = suffix(k)
        T, Hk, D = k.shape
        row = Hk * D
        if (s is None or v.dtype != k.dtype or k_cache.dtype != k.dtype or v_cache.dtype != k.dtype or row % 8
                or not (k_cache.is_contiguous() and v_cache.is_contiguous()) or T == 0
                or k.stride(2) != 1 or k.stride(1) != D or v.stride(2) != 1 or v.stride(1) != D
                or k.stride(0) % 8 or v.stride(0) % 8 or not _aligned(k, v, k_cache, v_cache)):
            return ref.write_kv(k, v, k_cache, v_cache, slots)
        slots = slots.to(torch.int64).contiguous()
        lib.module(k.device)[f"write_kv_{s}"]((T,), (128,), k, v, k_cache, v_cache, slots, row,
                                              k.stride(0), v.stride(0))

    def argmax(logits):
        if not logits.is_cuda or logits.dim() != 2 or logits.dtype not in (torch.float32, *lib.dtypes):
            return ref.argmax(logits)
        logits = logits.contiguous()
        T, V = logits.shape
        s = "f32" if logits.dtype == torch.float32 else DTYPE_SUFFIX[logits.dtype]
        out = torch.empty(T, dtype=torch.int64, device=logits.device)
        mod = lib.module(logits.device)
        if V <= ARGMAX_ONE_BLOCK:  # one block per row
            mod[f"argmax_{s}"]((T,), (1024,), logits, out, V)
            return out
        # a vocabulary row over many blocks (one block streamed a 248K row in ~49 us on the H200), then one
        # warp per row picks among their winners: the first index of the maximum, as torch.argmax
        nb = min(ARGMAX_MAX_BLOCKS, (V + ARGMAX_CHUNK - 1) // ARGMAX_CHUNK)
        chunk = (V + nb - 1) // nb
        pv = torch.empty(T, nb, dtype=torch.float32, device=logits.device)  # [T, nb] each block's maximum
        pi = torch.empty(T, nb, dtype=torch.int32, device=logits.device)  # [T, nb] and its first index
        mod[f"argmax_part_{s}"]((nb, T), (256,), logits, pv, pi, V, chunk)
        mod["argmax_reduce"]((T,), (32,), pv, pi, out, nb)
        return out

    def sigmoid_mul(x, gate, fixed=False):
        """fixed: for one token (H * D % 128 == 0) the output is also written in the fixed-point form of the
        quantised one-token GEMV (ninfer.quant.fixed), attached to it, for the o projection."""
        s = suffix(x)
        if (s is None or x.dim() != 3 or gate.shape != x.shape or gate.dtype != x.dtype or x.numel() == 0):
            return ref.sigmoid_mul(x, gate)
        T, H, D = x.shape
        x = x.contiguous()
        if (D % 8 or gate.stride(2) != 1 or gate.stride(0) % 8 or gate.stride(1) % 8
                or not _aligned(x, gate)):
            return ref.sigmoid_mul(x, gate)
        y = torch.empty(T, H, D, dtype=x.dtype, device=x.device)  # [T, H, D]
        n = T * H * (D // 8)
        xq = xg = None
        if fixed and T == 1 and H * D % 128 == 0:  # 256 threads a block: whole warps, a half warp a group
            xq = torch.empty(2, H * D, dtype=torch.int8, device=x.device)
            xg = torch.empty(H * D // 128, 2, dtype=torch.int32, device=x.device)
        lib.module(x.device)[f"sigmoid_mul_{s}"](((n + 255) // 256,), (256,), x, gate, y, T, H, D,
                                                 gate.stride(0), gate.stride(1), xq, xg)
        if xq is not None:
            attach(y, xq, xg)
        return y

    linear.mma = mma  # the fused gate_up + SwiGLU GEMV launches the same kernel family
    base = {"linear": linear, "rms_norm": rms_norm, "rms_norm_gated": rms_norm_gated, "rope": rope,
            "silu_mul": silu_mul, "write_kv": write_kv, "argmax": argmax, "sigmoid_mul": sigmoid_mul,
            "paged_attention": make_paged_attention(lib, sigmoid_mul), "gdn_gates": make_gdn_gates(lib), **make_gdn_ops(lib, rms_norm_gated)}
    return {**base, **make_fused_ops(lib, base)}


def serves(lib: KernelLibrary, supports):
    """The ``OpImpl.supports`` of a kernel library's ops: CUDA, a dtype it is built for, and the backend's check."""

    def ok(spec: DeviceSpec) -> bool:
        return spec.type == "cuda" and spec.dtype in lib.dtypes and supports(spec)

    return ok


def op_impls(backend: str, lib: KernelLibrary, supports) -> list[OpImpl]:
    """Every OpImpl of a backend; ``supports(spec)`` says whether it can serve a device/dtype."""
    fns = make_ops(lib)
    ok = serves(lib, supports)

    names = {"linear": f"{backend}.gemv (T=1) + cuBLAS (T>1); NINFER_GEMV=mma: {backend}.gemv_mma (T<=16)",
             "paged_attention": f"{backend}.flash_decoding (T<=16) + torch SDPA (prefill)"}
    return [OpImpl(op=op, backend=backend, fn=fn, name=names.get(op, f"{backend}.{op}"), priority=10,
                   supports=ok, phases=("prefill", "decode", "verify"))
            for op, fn in fns.items()]
