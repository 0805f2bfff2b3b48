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
    owner.check_parts(names, [p.shape[0] for p in parts])
    fused = cat_rows(parts)
    if fused is None:
        return None
    fused = fused.to(device)
    if device.type == "cuda":
        from .gpu import prepare

        prepare(fused)  # the tensor-core GEMV's tiled packing, made once here (never inside a graph capture)
    return fused


LM_HEAD_FORMATS = {"int8": 8, "int4": 4}


def quantize_lm_head(model, fmt: str, group_size: int = 128, rows_per_pass: int = 16384) -> None:
    """Opt-in (``LLM(quantize_lm_head="int8" | "int4")``): replace ``model.lm_head``'s dense weight by the
    grouped-int one ``ninfer quantize`` would write for it (round to nearest, symmetric, group 128 or the largest
    power of two that divides the input size, bf16 scales; fp16 scales on an fp16 model), quantised on its device
    ``rows_per_pass`` rows at a time. A tied embedding stays dense for the lookup. Checkpoints keep lm_head dense
    by convention (compressed-tensors' ``ignore``), and on a decode step it is a large read (2.54 of the 27B
    W4A16 step's 15.46 GB); its effect on accuracy is in bench/RESULTS.md (SmolLM2, CPU)."""
    from ..errors import NinferError
    from .layout import group_for
    from .quantize import quantize_groups

    if fmt not in LM_HEAD_FORMATS:
        raise NinferError(f"Unknown quantize_lm_head {fmt!r}; choose one of {', '.join(LM_HEAD_FORMATS)}.")
    lin = model.lm_head
    w = lin.weight
    if not isinstance(w, torch.Tensor):
        return  # the checkpoint's lm_head is quantised already
    g = group_for(lin.in_features, group_size)
    if g is None:
        raise NinferError(f"lm_head's input size {lin.in_features} has no group size of 16 or more; "
                          "leave quantize_lm_head off.")
    scale_dtype = torch.float16 if w.dtype == torch.float16 else torch.bfloat16
    parts = [quantize_groups(w[i:i + rows_per_pass], LM_HEAD_FORMATS[fmt], g, True, scale_dtype)
             for i in range(0, w.shape[0], rows_per_pass)]
    q = cat_rows(parts)
    lin.weight = q.to(w.device)
    if w.device.type == "cuda":
        from .gpu import prepare

        prepare(lin.weight)
