"""Stream weights from a memory-mapped checkpoint to the device, one tensor at a time.

Each parameter is read from the map, fused if needed (q|k|v, gate|up), cast and moved; the CPU
copy is dropped before the next one, so the model never exists twice in memory.
"""

from __future__ import annotations

import sys

import torch
from tqdm import tqdm

from ..errors import NinferError


def load_weights(model, checkpoint, names, dtype: torch.dtype, device: torch.device, progress: bool = True) -> None:
    """names: canonical name -> candidate checkpoint names (the architecture's naming rules)."""
    available = set(checkpoint.tensor_names())
    used: set[str] = set()

    def find(canonical: str) -> str:
        for cand in names(canonical):
            if cand in available:
                used.add(cand)
                return cand
        raise NinferError(f"The checkpoint at {checkpoint.path} has no tensor {canonical!r}; "
                          "is it complete and of the architecture its config names?")

    sources = model.weight_sources()
    total = sum(len(v) for v in sources.values())
    bar = tqdm(total=total, desc="loading weights", unit="tensor", file=sys.stderr,
               disable=None if progress else True, leave=False)
    from ..quant.load import load_quantized

    keep_quantized = getattr(model, "keep_quantized", None)
    dense: dict[tuple, torch.Tensor] = {}  # tied weights (embed == lm_head) share one device tensor
    for path, canon in sources.items():
        if tuple(canon) in dense:
            model.set_weight(path, dense[tuple(canon)])
            bar.update(len(canon))
            continue
        found = [find(c) for c in canon]
        q = load_quantized(model, path, checkpoint, found, device, keep_quantized)
        if q is not None:  # quantised formats stay quantised (ninfer.quant)
            model.set_weight(path, q)
            bar.update(len(canon))
            continue
        parts = [checkpoint.get(n) for n in found]
        owner = model.owner(path)
        if hasattr(owner, "check_parts"):
            owner.check_parts(found, [int(t.shape[0]) if t.dim() else 0 for t in parts])
        t = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
        t = t.to(device=device, dtype=dtype).contiguous()
        model.set_weight(path, t)
        dense[tuple(canon)] = t
        del parts, t
        bar.update(len(canon))
    bar.close()
    _check_shapes(model)
    _warn_unused(available, used, checkpoint)


# tensors a checkpoint may carry that the text model never reads: the MTP head (read by its own loader), vision
# towers and projectors of multimodal wrappers, rotary tables
_NOT_TEXT = ("mtp.", "model.visual.", "visual.", "model.vision", "vision_tower.", "vision_model.",
             "multi_modal_projector.", "model.multi_modal_projector.", "model.mm_projector.")


def _warn_unused(available: set[str], used: set[str], checkpoint) -> None:
    """One line on stderr naming checkpoint tensors the model did not read: a bias or a layer the architecture
    does not know would otherwise be dropped silently (the logits then quietly wrong). A read weight's
    companions (a quantised weight's scales, zero points, g_idx) count as read; a bias does not."""
    modules = {n.rsplit(".", 1)[0] for n in used}
    unused = sorted(n for n in available - used
                    if not n.startswith(_NOT_TEXT) and not n.endswith("rotary_emb.inv_freq")
                    and not (n.rsplit(".", 1)[0] in modules and not n.endswith(".bias")))
    if unused:
        more = f" and {len(unused) - 4} more" if len(unused) > 4 else ""
        sys.stderr.write(f"ninfer: warning: {checkpoint.path} has {len(unused)} tensor(s) this model does not read "
                         f"({', '.join(unused[:4])}{more}); if they matter (biases, extra layers), the config "
                         "does not describe these weights.\n")


def _check_shapes(model) -> None:
    from ..layers.linear import Linear
    from ..layers.norm import RMSNorm

    def disagree(path, got, want):
        raise NinferError(f"Weight {path} has shape {tuple(got)} but the config implies {tuple(want)}; the config "
                          "and weights disagree.")

    emb, cfg = getattr(model, "embed_tokens", None), getattr(model, "cfg", None)
    if isinstance(emb, torch.Tensor) and cfg is not None and tuple(emb.shape) != (cfg.vocab_size, cfg.hidden_size):
        disagree("model.embed_tokens", emb.shape, (cfg.vocab_size, cfg.hidden_size))

    def walk(obj, path):
        if isinstance(obj, Linear):
            w = obj.weight
            if w is not None and tuple(w.shape) != (obj.out_features, obj.in_features):
                disagree(path, w.shape, (obj.out_features, obj.in_features))
            return
        if isinstance(obj, RMSNorm):
            if isinstance(obj.weight, torch.Tensor) and tuple(obj.weight.shape) != (obj.dim,):
                disagree(path, obj.weight.shape, (obj.dim,))
            return
        for name, child in getattr(obj, "__dict__", {}).items():
            if name in ("ops", "cfg"):
                continue
            if isinstance(child, list):
                for i, c in enumerate(child):
                    walk(c, f"{path}.{name}.{i}")
            elif hasattr(child, "__dict__") and not isinstance(child, torch.Tensor):
                walk(child, f"{path}.{name}")

    walk(model, "model")
