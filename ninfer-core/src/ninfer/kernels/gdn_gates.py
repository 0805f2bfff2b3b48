"""Launcher of the Gated DeltaNet gate kernel (``include/ninfer/gdn_gates.cuh``): g and beta of every
token and value head in one launch. Meets ``ninfer.reference.gdn.gdn_gates``; anything else (CPU
tensors, other dtypes, strided columns, parameters not fp32) goes to the reference op."""

from __future__ import annotations

import torch

from ..reference import gdn as ref
from .library import DTYPE_SUFFIX, KernelLibrary


def make_gdn_gates(lib: KernelLibrary):
    def gdn_gates(a, b, A_log, dt_bias):
        if (not a.is_cuda or a.dtype not in lib.dtypes or b.dtype != a.dtype or a.dim() != 2
                or b.shape != a.shape or a.stride(1) != 1 or b.stride(1) != 1 or a.shape[0] == 0
                or A_log.dtype != torch.float32 or dt_bias.dtype != torch.float32
                or not A_log.is_contiguous() or not dt_bias.is_contiguous()
                or A_log.shape != (a.shape[1],) or dt_bias.shape != (a.shape[1],)
                or not all(t.device == a.device for t in (b, A_log, dt_bias))):
            return ref.gdn_gates(a, b, A_log, dt_bias)
        T, H = a.shape
        g = torch.empty(T, H, dtype=torch.float32, device=a.device)  # [T, H]
        beta = torch.empty(T, H, dtype=a.dtype, device=a.device)  # [T, H]
        n = T * H
        lib.module(a.device)[f"gdn_gates_{DTYPE_SUFFIX[a.dtype]}"](((n + 127) // 128,), (128,), a, b, A_log, dt_bias,
                                                                 g, beta, T, H, a.stride(0), b.stride(0))
        return g, beta

    return gdn_gates
