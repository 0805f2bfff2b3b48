"""Quantised weights through the streaming loader: one Linear's parts read, fused and moved at a time.

A checkpoint offers quantised weights through ``quant_weight(name)`` (compressed-tensors, GPTQ);
GGUF files through their raw blocks. Whether GGUF blocks stay quantised is a choice: on the GPU
they do (that is the point), on the CPU the reference backend would dequantise them on every
call, so there they are expanded once at load unless the caller asks otherwise.
"""

from __future__ import annotations

import torch

from ..layers.linear import Linear
from .layout import QuantWeight, cat_rows


def checkpoint_quant_weight(checkpoint, name: str, keep_gguf: bool) -> QuantWeight | None:
    reader = getattr(checkpoint, "quant_weight", None)
    if reader is not None:
        return reader(name)
    if keep_gguf and hasattr(checkpoint, "raw") and hasattr(checkpoint, "tensor_info"):
        from .gguf_repack import gguf_quant_weight

        return gguf_quant_weight(checkpoint, name)
    return None


def _target(model, path: str):
    obj = model
    parts = path.split(".")
    for p in parts[:-1]:
        obj = obj[int(p)] if p.isdigit() else getattr(obj, p, None)
        if obj is None:
            return None, None
    return obj, parts[-1]


def load_quantized(model, path: str, checkpoint, names: list[str], device: torch.device,
                   keep_quantized: bool | None) -> QuantWeight | None:
    """The quantised weight for ``path`` on ``device``, or None to load it dense.

    keep_quantized: True keeps every quantised format quantised, False expands all, None (auto)
    keeps compressed-tensors/GPTQ always and GGUF blocks only off the CPU.
    """
    owner, attr = _target(model, path)
    if not isinstance(owner, Linear) or attr != "weight" or keep_quantized is False:
        return None
    keep_gguf = keep_quantized is True or device.type != "cpu"
    parts = [checkpoint_quant_weight(checkpoint, n, keep_gguf) for n in names]
    if any(p is None for p in parts):
        return None  # some part is stored dense: load the fused weight dense
    fused = cat_rows(parts)
    if fused is None:
        return None
    fused = fused.to(device)
    if device.type == "cuda":
        from .gpu import prepare

        prepare(fused)  # the tensor-core GEMV's tiled packing, made once here (never inside a graph capture)
    return fused
