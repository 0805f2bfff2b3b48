"""SwiGLU MLP with gate and up projections fused into one GEMM."""

from __future__ import annotations

import torch

from ..reference.ops import NormIn
from .linear import Linear


class SwiGLU:
    def __init__(self, ops, hidden: int, intermediate: int):
        self.ops = ops
        self.gate_up = Linear(ops, hidden, 2 * intermediate)  # rows: [gate | up]
        self.down = Linear(ops, intermediate, hidden)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.hidden(x))

    def hidden(self, x) -> torch.Tensor:
        """silu(gate) * up, the down projection's input; x may be a norm left to the GEMV (NormIn, dense weights)."""
        if isinstance(self.gate_up.weight, torch.Tensor):  # dense: SwiGLU rides in the GEMV's epilogue
            if isinstance(x, NormIn):
                return self.ops.linear_silu_mul_norm_in(x, self.gate_up.weight)
            return self.ops.linear_silu_mul(x, self.gate_up.weight)
        return self.ops.silu_mul(self.gate_up(x))  # quantised weights: their own GEMM

    def weight_sources(self, prefix: str) -> dict[str, list[str]]:
        return {"gate_up.weight": [f"{prefix}.gate_proj.weight", f"{prefix}.up_proj.weight"],
                "down.weight": [f"{prefix}.down_proj.weight"]}
