"""The capacity planner: the longest context a memory budget holds for a model and KV format.

budget = weights (as they will sit on the device) + fixed workspace + recurrent state
         + context * (KV bytes per token + RoPE table bytes per token
                      + what one layer's prefill attention copies per context token, on a GPU)
"""

from __future__ import annotations

import os

import torch

from ..errors import NinferError
from .kv_cache import bytes_per_token

WORKSPACE_FIXED = 512 * 2**20  # CUDA context, allocator slack, CUDA graphs


def weight_bytes(checkpoint, dtype: torch.dtype, keep_gguf: bool = True) -> int:
    """Bytes the weights take once loaded: quantised tensors at their packed size, the rest at dtype."""
    elt = torch.empty((), dtype=dtype).element_size()
    total = 0
    stored = getattr(checkpoint, "_stored", None)
    quant_modules = getattr(checkpoint, "_modules", set())
    for name in checkpoint.tensor_names():
        if "visual" in name or name.startswith("mtp"):
            continue
        shape = checkpoint.tensor_shape(name)
        n = 1
        for s in shape:
            n *= s
        module = name[: -len(".weight")]
        if stored is not None and module in quant_modules:  # compressed-tensors / GPTQ: stored parts
            total += sum(_stored_nbytes(checkpoint, p) for p in stored if p.startswith(module + "."))
        elif len(shape) == 2 and _gguf_kept(checkpoint, name, keep_gguf):
            total += checkpoint.tensor_info(name).nbytes
        else:
            total += n * elt
    return total  # a tied lm_head reads the embedding table in place: counted once


def _gguf_kept(checkpoint, name: str, keep_gguf: bool) -> bool:
    """Whether a GGUF tensor stays quantised on the device (ninfer.quant.gguf_repack.KEPT_QUANTISED)."""
    from .gguf_repack import KEPT_QUANTISED

    return keep_gguf and hasattr(checkpoint, "tensor_info") and checkpoint.tensor_type(name) in KEPT_QUANTISED


def lm_head_quant_delta(checkpoint, cfg, dtype: torch.dtype, fmt: str | None, keep_gguf: bool = True) -> int:
    """Bytes ``LLM(quantize_lm_head=fmt)`` adds to ``weight_bytes`` (negative: saves): a dense lm_head becomes
    grouped-int codes plus a 16-bit scale a group (ninfer.quant.load.quantize_lm_head); a tied one keeps the
    embedding dense for the lookup, so the codes come on top; one stored quantised already is left as it is."""
    from .layout import group_for
    from .load import LM_HEAD_FORMATS

    if not fmt:
        return 0
    rows, cols = cfg.vocab_size, cfg.hidden_size
    g = group_for(cols, 128)
    if g is None:
        return 0  # quantize_lm_head refuses it at load
    quant = rows * cols * LM_HEAD_FORMATS[fmt] // 8 + rows * (cols // g) * 2
    names = set(checkpoint.tensor_names())
    if "lm_head.weight" not in names:
        return quant  # tied: the embedding stays as it is
    if "lm_head" in getattr(checkpoint, "_modules", set()) or _gguf_kept(checkpoint, "lm_head.weight", keep_gguf):
        return 0  # quantised in the checkpoint: quantize_lm_head leaves it
    return quant - rows * cols * torch.empty((), dtype=dtype).element_size()


def _stored_nbytes(checkpoint, name: str) -> int:
    sl = checkpoint._handle(checkpoint._files[name]).get_slice(name)
    n = 1
    for s in sl.get_shape():
        n *= s
    return n * {"I32": 4, "F16": 2, "BF16": 2, "F32": 4, "I64": 8, "U8": 1, "I8": 1}.get(sl.get_dtype(), 4)


def workspace_bytes(cfg, dtype: torch.dtype, prefill_chunk: int = 2048) -> int:
    """Activations of one prefill chunk (with headroom for temporaries) plus a logits row."""
    elt = torch.empty((), dtype=dtype).element_size()
    per_token = (4 * cfg.hidden_size + 3 * cfg.intermediate_size + 3 * cfg.num_heads * cfg.head_dim) * elt
    return WORKSPACE_FIXED + 2 * prefill_chunk * per_token + 16 * cfg.vocab_size * 4


def prefill_copy_bytes_per_token(cfg, kv_format: str, dtype: torch.dtype, capability: tuple[int, int] = (9, 0),
                                 block_size: int = 64) -> int:
    """Bytes per context token that the attention of one prefill chunk allocates on a CUDA GPU of ``capability`` for
    one layer (freed before the next layer's): torch SDPA reads a dense copy of the context's K and V, gathered from
    a bf16 / fp16 cache's blocks (``kernels.attention.prefill_sdpa``) or, from a quantised cache's dense pass,
    dequantised (``kvq_gather``). Where torch's flash kernel cannot read K and V per kv head (below sm_80, float32),
    they are also repeated to the query heads.
    ``kvq_prefill`` (a quantised cache on sm_75+, 16-bit activations, blocks of a power of two tokens, unless
    ``NINFER_KVQ_PREFILL=gather``) copies nothing."""
    from ..kernels import kv_quant

    elt = torch.empty((), dtype=dtype).element_size()
    quantised = kv_format not in ("auto", "bf16")
    if quantised and kv_quant.PREFILL_MODE != "gather" and capability >= (7, 5) and elt == 2 \
            and block_size & (block_size - 1) == 0:
        return 0
    copies = 2 * cfg.num_kv_heads * cfg.head_dim * elt  # K and V of one token, one layer
    if capability < (8, 0) or elt == 4:
        copies += 2 * cfg.num_heads * cfg.head_dim * elt  # repeated to the query heads
    return copies


def plan_max_context(cfg, budget_bytes: int, kv_format: str, weights: int, dtype: torch.dtype,
                     state_bytes: int = 0, block_size: int = 64, capability: tuple[int, int] | None = (9, 0)) -> int:
    """The largest context (a multiple of block_size, at most the model's limit) that fits the budget. ``capability``:
    the CUDA GPU's, for what a prefill chunk's attention copies (:func:`prefill_copy_bytes_per_token`); None on the
    CPU, whose reference attention is not planned for."""
    fmt = "bf16" if kv_format in ("auto", "bf16") else kv_format
    per_token = bytes_per_token(fmt, len(cfg.attention_layers), cfg.num_kv_heads, cfg.head_dim, dtype)
    per_token += cfg.rotary_dim * 4  # the float32 cos/sin table is sized by the context too
    if capability is not None and cfg.attention_layers:
        per_token += prefill_copy_bytes_per_token(cfg, kv_format, dtype, capability, block_size)
    free = budget_bytes - weights - workspace_bytes(cfg, dtype) - state_bytes
    ctx = int(free // per_token) // block_size * block_size
    if ctx < block_size:
        raise NinferError(f"The model needs {(weights + workspace_bytes(cfg, dtype)) / 2**30:.1f} GiB before any "
                          f"KV cache but the budget is {budget_bytes / 2**30:.1f} GiB; use quantised weights, "
                          "a smaller model or a bigger GPU.")
    return min(ctx, cfg.max_position_embeddings)


def device_budget(device: torch.device) -> int:
    """Memory ninfer may use here: 95% of the GPU's free memory, or half the available RAM."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * 0.95)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def auto_max_context(checkpoint, cfg, arch, device: torch.device, dtype: torch.dtype, kv_format: str,
                     keep_quantized: bool | None = None, budget: int | None = None,
                     lm_head: str | None = None) -> int:
    """``--max-context auto``: plan against this device's free memory (or ``budget`` bytes); ``lm_head``: the
    ``quantize_lm_head`` format the model will load with."""
    keep_gguf = keep_quantized is True or (keep_quantized is None and device.type != "cpu")
    weights = weight_bytes(checkpoint, dtype, keep_gguf) + lm_head_quant_delta(checkpoint, cfg, dtype, lm_head,
                                                                                keep_gguf)
    state = arch.state_bytes(cfg) if hasattr(arch, "state_bytes") else 0
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return plan_max_context(cfg, budget if budget is not None else device_budget(device), kv_format, weights,
                            dtype, state, capability=capability)


def capacity_rows(checkpoint, cfg, arch, dtype: torch.dtype, budgets_gb=(16, 24)) -> dict:
    """``ninfer info`` rows: the longest context per KV format on common card sizes (weights as stored; an sm_80+
    GPU's prefill copies)."""
    weights = weight_bytes(checkpoint, dtype, keep_gguf=True)
    state = arch.state_bytes(cfg) if hasattr(arch, "state_bytes") else 0
    rows = {"weights as loaded on a GPU": f"{weights / 1e9:.2f} GB"}
    for gb in budgets_gb:
        cells = []
        for fmt in ("bf16", "int8", "int4"):
            try:
                cells.append(f"{fmt} {plan_max_context(cfg, gb * 2**30, fmt, weights, dtype, state)}")
            except NinferError:
                cells.append(f"{fmt} does not fit")
        rows[f"max context on {gb} GB (KV format)"] = ", ".join(cells)
    return rows
