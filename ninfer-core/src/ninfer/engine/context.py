"""Per-forward metadata in one object, so layer signatures stay ``(x, ctx)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class ForwardContext:
    positions: torch.Tensor  # [T] int64 on device: position of each new token
    slots: torch.Tensor  # [T] int64 on device: KV pool slot of each new token
    block_table: torch.Tensor  # [max_blocks] int32 on device
    kv: Any  # PagedKVCache
    cos_sin: torch.Tensor  # [max_positions, rotary_dim]
    phase: str = "prefill"  # "prefill" | "decode" | "verify"
    state: Any = None  # per-sequence recurrent state (hybrid models), or None
