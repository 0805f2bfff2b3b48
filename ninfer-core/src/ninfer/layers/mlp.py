"""SwiGLU MLP with gate and up projections fused into one GEMM."""

from __future__ import annotations

import torch

from .linear import Linear


class SwiGLU:
    def __init__(self, ops, hidden: int, intermediate: int, bias: bool = False):
        self.ops = ops
        self.gate_up = Linear(ops, hidden, 2 * intermediate, bias=bias, parts=(intermediate, intermediate))  # [gate | up]
        self.down = Linear(ops, intermediate, hidden, bias=bias)
        self.fixed = False  # the quantised SwiGLU GEMV also writes its row in down's fixed-point form (DecoderBlock)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up.bias is not None:  # Llama's mlp_bias: the plain ops
            return self.down(self.ops.silu_mul(self.gate_up(x)))
        if isinstance(self.gate_up.weight, torch.Tensor):  # dense: SwiGLU rides in the GEMV's epilogue
            return self.down(self.ops.linear_silu_mul(x, self.gate_up.weight))
        # quantised weights: their GEMM, with SwiGLU in its epilogue where it offers that (one token on the GPU)
        fused = getattr(self.ops.linear_for(self.gate_up.weight.layout), "with_silu_mul", None)
        y = None
        if fused is not None and self.gate_up.bias is None:
            y = fused(x, self.gate_up.weight, fixed_out=True) if self.fixed else fused(x, self.gate_up.weight)
        return self.down(y if y is not None else self.ops.silu_mul(self.gate_up(x)))

    def weight_sources(self, prefix: str) -> dict[str, list[str]]:
        src = {"gate_up.weight": [f"{prefix}.gate_proj.weight", f"{prefix}.up_proj.weight"],
               "down.weight": [f"{prefix}.down_proj.weight"]}
        if self.gate_up.has_bias:
            src["gate_up.bias"] = [f"{prefix}.gate_proj.bias", f"{prefix}.up_proj.bias"]
            src["down.bias"] = [f"{prefix}.down_proj.bias"]
        return src
