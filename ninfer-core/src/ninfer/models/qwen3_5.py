"""Qwen3.5 / 3.6 / 3.8 (the 27B hybrid): the one decoder with Gated DeltaNet and gated attention.

Recognised from config.json (``model_type`` ``qwen3_5`` with the text model under
``text_config``, or ``qwen3_5_text``), never from the name. Layers follow ``layer_types``
([linear_attention x3, full_attention] x16 for the 27B). Full attention: q_proj yields the query
and a sigmoid output gate per head, zero-centred q/k RMSNorm before RoPE, RoPE on the first 25%
of each head (text-only mrope is plain RoPE: all three position ids are equal). Every RMSNorm is
zero-centred ((1 + w)) except the GDN output norm.

Checkpoints name the text model ``model.language_model.*`` (published, multimodal) or
``model.layers.*`` (``Qwen3_5ForCausalLM``). Vision tensors are never read; ``mtp.*`` tensors
(the multi-token-prediction head) are loaded into ``model.extra_weights`` for the MTP drafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..config.model import base_config
from ..errors import NinferError
from ..kv.recurrent import RecurrentState
from ..layers import gated_deltanet  # noqa: F401  (registers the "linear_attention" mixer)
from ..layers.gated_deltanet import GDNShape
from . import ArchSpec, register_arch

MODEL_TYPES = ("qwen3_5", "qwen3_5_text")
MTP_PREFIX = "mtp."


def qwen3_5_config(raw: dict, architecture: str):
    rope = raw.get("rope_parameters") or {}
    n = raw["num_hidden_layers"]
    layer_types = raw.get("layer_types")
    if not layer_types:  # older configs give the interval instead of the list
        every = int(raw.get("full_attention_interval", 4))
        layer_types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    if len(layer_types) != n or set(layer_types) - {"full_attention", "linear_attention"}:
        raise NinferError(f"config.json's layer_types must list {n} entries of full_attention or "
                          "linear_attention; use the model's original config.")
    for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim"):
        if key not in raw:
            raise KeyError(key)
    rope_type = rope.get("rope_type", "default")
    return base_config(
        raw, architecture, layer_types=list(layer_types),
        qk_norm=True, attn_output_gate=bool(raw.get("attn_output_gate", True)), norm_zero_centered=True,
        attention_bias=bool(raw.get("attention_bias", False)),
        o_bias=bool(raw.get("attention_bias", False)),
        partial_rotary_factor=float(rope.get("partial_rotary_factor", raw.get("partial_rotary_factor", 0.25))),
        rope_theta=float(rope.get("rope_theta", raw.get("rope_theta", 10_000_000.0))),
        rope_scaling=None if rope_type == "default" else rope,
    )


def checkpoint_names(canonical: str) -> list[str]:
    """Published checkpoints nest the text model under model.language_model."""
    if canonical.startswith("model."):
        return [canonical, "model.language_model." + canonical[len("model."):]]
    return [canonical]


def state_bytes(cfg) -> int:
    """Recurrent state one sequence needs (conv windows + fp32 delta-rule states of every GDN layer)."""
    s = GDNShape.from_config(cfg)
    return RecurrentState.bytes_per_sequence(s.num_layers(cfg), s.conv_dim, s.conv_kernel,
                                             s.value_heads, s.key_dim, s.value_dim)


def new_state(cfg, device) -> RecurrentState:
    s = GDNShape.from_config(cfg)
    return RecurrentState(s.num_layers(cfg), s.conv_dim, s.conv_kernel, s.value_heads, s.key_dim,
                          s.value_dim, device)


def load_mtp_weights(model, checkpoint, dtype: torch.dtype, device) -> list[str]:
    """Keep every ``mtp.*`` tensor (under its checkpoint name) in model.extra_weights; return the names."""
    names = [n for n in checkpoint.tensor_names() if n.startswith(MTP_PREFIX)]
    for n in names:
        model.extra_weights[n] = checkpoint.get(n).to(device=device, dtype=dtype).contiguous()
    return names


@dataclass(frozen=True)
class HybridArchSpec(ArchSpec):
    """An architecture with recurrent state: the runner asks it for a fresh state per sequence."""

    state_factory: Callable = new_state  # (cfg, device) -> RecurrentState
    state_bytes: Callable = state_bytes  # cfg -> bytes per sequence
    load_extra: Callable = load_mtp_weights  # (model, checkpoint, dtype, device) after the main weights


for _arch in ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"):
    register_arch(HybridArchSpec(_arch, MODEL_TYPES, lambda c, a=_arch: qwen3_5_config(c, a), checkpoint_names))
