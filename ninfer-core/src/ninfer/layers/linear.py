"""A linear layer: holds its weight in the backend's layout and calls the registered GEMM."""

from __future__ import annotations

import torch


class Linear:
    def __init__(self, ops, in_features: int, out_features: int, bias: bool = False,
                 parts: tuple[int, ...] | None = None):
        self.ops = ops
        self.in_features, self.out_features = in_features, out_features
        self.parts = parts  # rows of each checkpoint tensor fused on dim 0 (q|k|v, gate|up), checked at load
        self.weight: torch.Tensor | None = None  # [out, in], or a quantised weight (ninfer.quant.QuantWeight)
        self.bias: torch.Tensor | None = None
        self.has_bias = bias

    def check_parts(self, names: list[str], rows: list[int]) -> None:
        """Checkpoint tensors fused on dim 0 into this layer's weight or bias (q|k|v, gate|up), dense or quantised, must
        each have the rows the config gives them: parts with the right total but another split would load and compute
        garbage."""
        want = tuple(self.parts or ())
        if len(rows) > 1 and len(rows) == len(want) and tuple(rows) != want:
            from ..errors import NinferError

            raise NinferError(f"{', '.join(names)} have {', '.join(map(str, rows))} rows but the config implies "
                              f"{', '.join(map(str, want))}; the config and weights disagree.")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.weight, torch.Tensor):
            return self.ops.linear(x, self.weight, self.bias)
        return self.ops.linear_for(self.weight.layout)(x, self.weight, self.bias)
