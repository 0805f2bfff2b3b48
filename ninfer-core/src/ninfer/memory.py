"""What a checkpoint needs on the device, computed from its config and tensor headers (no loading)."""

from __future__ import annotations

import torch

from .config.model import model_config_from_hf
from .weights import open_checkpoint


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def memory_report(model: str | None = None, dtype: torch.dtype = torch.bfloat16) -> dict:
    from .llm import default_model_path
    from .models import ARCHITECTURES

    path = model or default_model_path()
    ckpt = open_checkpoint(path)
    cfg = model_config_from_hf(ckpt.config)
    elt = torch.empty((), dtype=dtype).element_size()
    params = mtp = 0
    for name in ckpt.tensor_names():
        if "visual" in name:
            continue  # vision weights are never loaded
        n = 1
        for s in ckpt.tensor_shape(name):
            n *= s
        if name.startswith("mtp"):
            mtp += n
        else:
            params += n
    n_attn = len(cfg.attention_layers)
    kv_tok = 2 * n_attn * cfg.num_kv_heads * cfg.head_dim * elt
    arch = ARCHITECTURES[cfg.architecture]
    state = arch.state_bytes(cfg) if hasattr(arch, "state_bytes") else 0
    return {
        "model": path,
        "architecture": cfg.architecture,
        "layers": f"{cfg.num_layers} ({n_attn} full attention)",
        "parameters": f"{params / 1e9:.3f} B",
        "weights (bf16)": _gb(params * elt),
        **({"mtp head (bf16, for --draft mtp)": _gb(mtp * elt)} if mtp else {}),
        "kv cache per token (bf16)": f"{kv_tok / 1024:.1f} KiB",
        "kv cache at 32K tokens": _gb(kv_tok * 32768),
        "recurrent state per sequence": f"{state / 2**20:.1f} MiB",
        "max position embeddings": cfg.max_position_embeddings,
        **_capacity(ckpt, cfg, arch, dtype),
    }


def _capacity(ckpt, cfg, arch, dtype) -> dict:
    from .quant.capacity import capacity_rows  # the capacity planner, per KV format

    return capacity_rows(ckpt, cfg, arch, dtype)
