"""Launchers for the fused decode kernels (``include/ninfer/fused.cuh``).

Each fused op computes what its reference op in ``ninfer.reference.ops`` computes; where a kernel's
assumptions do not hold (dtype, alignment, strides, more than one token for the GEMV), the launcher
composes the backend's unfused launchers instead, which is also what ``NINFER_FUSED=0`` selects for
every call (A/B measurements: the same kernels as before the fusions, launch for launch).
"""

from __future__ import annotations

import os

import torch

from ..quant.fixed import attach
from . import gemv as _gemv
from .library import DTYPE_SUFFIX, KernelLibrary

# the ops each backend registers from here: removing one serves it by the reference op instead
FUSED_OPS = ("add_rms_norm", "rope_write_kv", "linear_silu_mul", "gdn_in_proj", "gdn_recurrent_gated",
             "attention_gated")


def fusion_enabled(name: str) -> bool:
    """``NINFER_FUSED``: unset or 1 turns on the fused ops of FUSED_OPS, 0 none (the unfused kernels, launch
    for launch), else a comma list of those on, which may add attention_merge (the split merge in the
    attention split kernel: correct, but slower than the separate combine kernel on the H200, so opt-in)."""
    v = os.environ.get("NINFER_FUSED", "1").strip()
    if v in ("", "1"):
        return name in FUSED_OPS
    return v != "0" and name in {s.strip() for s in v.split(",")}


def make_fused_ops(lib: KernelLibrary, base: dict) -> dict:
    """``base``: the backend's unfused launchers (rms_norm, rope, write_kv, linear, silu_mul)."""
    warps = lib.tuning("NINFER_GEMV_WARPS", 4)
    pairs = lib.tuning("NINFER_GEMV_PAIRS", 0) == 1  # gemv.form: two rows a warp (gemv_rows)
    silu2 = lib.tuning("NINFER_GEMV_SILU2", 0) == 1  # gate_up: fused.cuh gemv_silu2 instead of gemv_silu
    on = {op: fusion_enabled(op) for op in FUSED_OPS}

    def suffix(t: torch.Tensor, op: str):
        return DTYPE_SUFFIX.get(t.dtype) if on[op] and t.is_cuda and t.dtype in lib.dtypes else None

    def aligned(*ts) -> bool:
        return all(t.data_ptr() % 16 == 0 for t in ts)

    def add_rms_norm(x, residual, weight, eps, zero_centered=False, fixed=False):
        """fixed: for one row (H % 128 == 0), the normed row is also written in the 16-bit fixed point of the
        quantised one-token GEMV (ninfer.quant.fixed), attached to the returned row (``fixed.attach``)."""
        s = suffix(x, "add_rms_norm")
        H = x.shape[-1]
        if (s is None or residual.dtype != x.dtype or weight.dtype != x.dtype or residual.shape != x.shape
                or H % 8 or x.numel() == 0 or not weight.is_contiguous()):
            h = x + residual
            return base["rms_norm"](h, weight, eps, zero_centered), h
        x2, r2 = x.reshape(-1, H).contiguous(), residual.reshape(-1, H).contiguous()  # [rows, H]
        if not aligned(x2, r2, weight):
            h = x + residual
            return base["rms_norm"](h, weight, eps, zero_centered), h
        rows = x2.shape[0]
        y = torch.empty_like(x2)  # [rows, H] the normed rows
        h = torch.empty_like(x2)  # [rows, H] the new residual stream
        threads = min(1024, (H // 8 + 31) // 32 * 32)  # a 16-byte vector a thread up to H = 8192, <= 4 to 32768
        if "-DNINFER_NORM_TWO_PASS" in lib.options:  # measurements only: the former kernel (common.cuh)
            threads = min(256, max(32, threads))
        name = f"add_rms_norm_zc_{s}" if zero_centered else f"add_rms_norm_{s}"
        xq = xg = None
        if (fixed and rows == 1 and H % 128 == 0 and H <= 4 * 8 * threads  # the one-pass form writes it
                and "-DNINFER_NORM_TWO_PASS" not in lib.options):
            xq = torch.empty(2, H, dtype=torch.int8, device=x.device)
            xg = torch.empty(H // 128, 2, dtype=torch.int32, device=x.device)
        lib.module(x.device)[name]((rows,), (threads,), x2, r2, weight, y, h, H, float(eps), xq, xg)
        y = y.view(x.shape)
        if xq is not None:
            attach(y, xq, xg)
        return y, h.view(x.shape)

    def unfused_rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, q_norm, k_norm, eps, zc):
        if q_norm is not None:
            q, k = base["rms_norm"](q, q_norm, eps, zc), base["rms_norm"](k, k_norm, eps, zc)
        q, k = base["rope"](q, k, positions, cos_sin)
        base["write_kv"](k, v, k_cache, v_cache, slots)
        return q

    def rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, q_norm=None, k_norm=None,
                      eps=1e-6, zero_centered=False):
        s = suffix(q, "rope_write_kv")
        T, Hq, D = q.shape
        Hk = k.shape[1]
        norms = () if q_norm is None else (q_norm, k_norm)
        if (s is None or T == 0 or D % 32 or D > 1024 or cos_sin.dtype != torch.float32
                or cos_sin.shape[-1] > D or cos_sin.shape[-1] % 2
                or any(t.dtype != q.dtype for t in (k, v, k_cache, v_cache, *norms))
                or any(not t.is_contiguous() for t in (k_cache, v_cache, cos_sin, *norms))
                or q.stride(2) != 1 or k.stride(2) != 1 or k.stride(1) != D or v.stride(2) != 1
                or v.stride(1) != D or v.shape != k.shape):
            return unfused_rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, q_norm, k_norm,
                                         eps, zero_centered)
        q_out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)  # [T, Hq, D]
        pos = positions.to(torch.int64).contiguous()
        slots = slots.to(torch.int64).contiguous()
        lib.module(q.device)[f"rope_write_kv_{s}"](
            (T, Hq + Hk), (D,), q, k, v, q_norm, k_norm, pos, cos_sin, q_out, k_cache, v_cache, slots,
            Hq, Hk, D, cos_sin.shape[-1], q.stride(0), q.stride(1), k.stride(0), v.stride(0), float(eps),
            int(bool(zero_centered)))
        return q_out

    def linear_silu_mul(x, weight):
        s = suffix(x, "linear_silu_mul")
        K, I2 = x.shape[-1], weight.shape[0]
        T = x.numel() // K if K else 0
        mma = getattr(base["linear"], "mma", None)
        if (s is not None and mma is not None and _gemv.mma_on() and 1 <= T <= _gemv.MMA_MAX_TOKENS  # NINFER_GEMV=mma
                and weight.dtype == x.dtype and K % 8 == 0 and I2 % 2 == 0 and weight.is_contiguous()):
            x2 = x.reshape(T, K).contiguous()  # [T, K]
            if aligned(x2, weight):  # bitwise silu_mul(linear(x, W)) for any T <= 16 (gemv.cuh)
                return mma(x2, weight, None, silu=True).view(*x.shape[:-1], I2 // 2)
        if (s is None or x.numel() != K or weight.dtype != x.dtype or K % 8 or I2 % 2
                or not weight.is_contiguous()):
            return base["silu_mul"](base["linear"](x, weight))  # prefill and verify: T > 1
        x1 = x.reshape(1, K).contiguous()
        if not aligned(x1, weight):
            return base["silu_mul"](base["linear"](x, weight))
        I = I2 // 2
        y = torch.empty(*x.shape[:-1], I, dtype=x.dtype, device=x.device)  # [..., I]
        env = os.environ.get("NINFER_GEMV_SILU2")  # 0 / 1: A/B of the backend's choice (read at each launch)
        if (env == "1" if env in ("0", "1") else silu2) and warps % 2 == 0:  # gate and up rows on two warps
            lib.module(x.device)[f"gemv_silu2_t1_{s}"](((2 * I + warps - 1) // warps,), (warps * 32,), weight, x1, y,
                                                      I, K)
        else:
            lib.module(x.device)[f"gemv_silu_t1_{s}"](((I + warps - 1) // warps,), (warps * 32,), weight, x1, y, I,
                                                     K)
        return y

    def unfused_gdn_in_proj(x, weight, conv_weight, conv_state, A_log, dt_bias, conv_dim, z_dim):
        H = (weight.shape[0] - conv_dim - z_dim) // 2
        mixed, z, b, a = base["linear"](x, weight).split([conv_dim, z_dim, H, H], dim=-1)
        y, _ = base["causal_conv1d_update"](mixed, conv_weight, None, conv_state, out_state=conv_state)
        g, beta = base["gdn_gates"](a, b, A_log, dt_bias)
        return y, z, g, beta

    def gdn_in_proj(x, weight, conv_weight, conv_state, A_log, dt_bias, conv_dim, z_dim):
        """One token: the projection GEMV with the conv update and the gates in its epilogue (gemv.cuh:
        GdnInEpilogue), the split of K chosen as ``linear`` chooses it, so the projection's bits are the same."""
        s = suffix(x, "gdn_in_proj")
        K, N = x.shape[-1], weight.shape[0]
        H = (N - conv_dim - z_dim) // 2
        f32 = torch.float32
        if (s is None or x.numel() != K or _gemv.mma_on() or weight.dtype != x.dtype or K % 8 or H <= 0
                or N != conv_dim + z_dim + 2 * H or not weight.is_contiguous()
                or conv_weight.shape != (conv_dim, 4) or conv_weight.dtype != x.dtype
                or not conv_weight.is_contiguous() or conv_state.shape != (conv_dim, 3) or conv_state.dtype != f32
                or not conv_state.is_contiguous() or A_log.shape != (H,) or dt_bias.shape != (H,)
                or A_log.dtype != f32 or dt_bias.dtype != f32 or not A_log.is_contiguous()
                or not dt_bias.is_contiguous()
                or any(t.device != x.device for t in (weight, conv_weight, conv_state, A_log, dt_bias))):
            return unfused_gdn_in_proj(x, weight, conv_weight, conv_state, A_log, dt_bias, conv_dim, z_dim)
        x1 = x.reshape(1, K).contiguous()
        if not aligned(x1, weight):
            return unfused_gdn_in_proj(x, weight, conv_weight, conv_state, A_log, dt_bias, conv_dim, z_dim)
        y = torch.empty(1, conv_dim + z_dim, dtype=x.dtype, device=x.device)  # [1, C + Z]: conv out | z
        g = torch.empty(1, H, dtype=f32, device=x.device)  # [1, H]
        beta = torch.empty(1, H, dtype=x.dtype, device=x.device)  # [1, H]
        rows_w, sk = _gemv.form(N, K, pairs) if warps % 4 == 0 else (1, 1)
        rows = warps // sk * rows_w  # output rows a block
        name = f"gemv_gdn_in_{s}_t1" + ("_r2" if rows_w == 2 else "") + (f"_k{sk}" if sk > 1 or rows_w == 2 else "")
        lib.module(x.device)[name](((N + rows - 1) // rows,), (warps * 32,), weight, x1, y, N, K, conv_weight,
                                   conv_state, A_log, dt_bias, g, beta, conv_dim, z_dim, H)
        return y[:, :conv_dim], y[:, conv_dim:], g, beta

    def attention_gated(q, k_cache, v_cache, block_table, positions, scale, gate, fixed=False):
        """Decode attention with Qwen3.5's output gate applied by its combine kernel (kernels/attention.py)."""
        if on["attention_gated"]:
            return base["paged_attention"](q, k_cache, v_cache, block_table, positions, scale, gate=gate, fixed=fixed)
        return base["sigmoid_mul"](base["paged_attention"](q, k_cache, v_cache, block_table, positions, scale),
                                   gate, fixed)

    return {"add_rms_norm": add_rms_norm, "rope_write_kv": rope_write_kv, "linear_silu_mul": linear_silu_mul,
            "gdn_in_proj": gdn_in_proj, "attention_gated": attention_gated}
