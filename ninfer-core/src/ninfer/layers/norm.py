"""RMSNorm as a layer (plain w, or zero-centred (1 + w) for Qwen3.5)."""

from __future__ import annotations

import torch


class RMSNorm:
    def __init__(self, ops, dim: int, eps: float, zero_centered: bool = False):
        self.ops, self.dim, self.eps, self.zero_centered = ops, dim, eps, zero_centered
        self.weight: torch.Tensor | None = None  # [dim]
        self.fixed = False  # also write one row in the int4 GEMV's fixed-point form (ninfer.quant.fixed)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.ops.rms_norm(x, self.weight, self.eps, self.zero_centered)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual add fused with this norm: (norm(x + residual), x + residual)."""
        if self.fixed:
            return self.ops.add_rms_norm(x, residual, self.weight, self.eps, self.zero_centered, fixed=True)
        return self.ops.add_rms_norm(x, residual, self.weight, self.eps, self.zero_centered)
