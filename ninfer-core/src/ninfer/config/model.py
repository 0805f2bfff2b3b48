"""The model's shape, read from a Hugging Face style config dict (readers synthesise one for GGUF)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import NinferError


@dataclass
class ModelConfig:
    architecture: str
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Qwen2: q/k/v carry biases
    o_bias: bool = False  # Llama / Qwen3 / Qwen3.5 with attention_bias: o_proj carries one too (Qwen2's does not)
    mlp_bias: bool = False  # Llama's mlp_bias: gate, up and down carry biases
    qk_norm: bool = False  # Qwen3 / Qwen3.5: per-head RMSNorm of q and k before RoPE
    attn_output_gate: bool = False  # Qwen3.5: q_proj also yields a sigmoid gate on the output
    norm_zero_centered: bool = False  # Qwen3.5: RMSNorm scales by (1 + w)
    layer_types: list[str] = field(default_factory=list)  # per layer: "full_attention" | "linear_attention"
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # the raw config, for mixers that need more

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def attention_layers(self) -> list[int]:
        return [i for i, t in enumerate(self.layer_types) if t == "full_attention"]


def _eos_list(v) -> list[int]:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [int(v)]


def model_config_from_hf(cfg: dict) -> ModelConfig:
    """Build a ModelConfig for a supported architecture, or say which ones are supported."""
    from ..models import ARCHITECTURES

    archs = cfg.get("architectures") or []
    mt = cfg.get("model_type")
    spec = None
    for a in archs:
        if a in ARCHITECTURES:
            spec = ARCHITECTURES[a]
            break
    if spec is None and not (archs and cfg.get("outer_model_type")):  # a multimodal wrapper ninfer does not
        for s in ARCHITECTURES.values():                               # know (LLaVA) is not its text model
            if mt in s.model_types:
                spec = s
                break
    if spec is None:
        names = ", ".join(sorted(ARCHITECTURES))
        got = ", ".join(archs) or mt or "none"
        raise NinferError(f"Unsupported architecture {got}; ninfer supports: {names}.")
    act = cfg.get("hidden_act") or "silu"
    if act not in ("silu", "swish"):
        raise NinferError(f"hidden_act {act!r} is not supported: ninfer's MLP is SwiGLU (silu), so this model "
                          "would give wrong outputs; use a silu model.")
    try:
        return spec.config(cfg)
    except KeyError as e:
        raise NinferError(f"config.json lacks {e.args[0]!r}, which {spec.name} needs; use the model's original config.") from None


def base_config(cfg: dict, architecture: str, **overrides) -> ModelConfig:
    """Fields every decoder-only Llama-family config has."""
    heads = cfg["num_attention_heads"]
    hidden = cfg["hidden_size"]
    n_layers = cfg["num_hidden_layers"]
    fields = dict(
        architecture=architecture,
        model_type=cfg.get("model_type", ""),
        hidden_size=hidden,
        intermediate_size=cfg["intermediate_size"],
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=cfg.get("head_dim") or hidden // heads,
        vocab_size=cfg["vocab_size"],
        rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
        rope_theta=float(cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)),
        rope_scaling=cfg.get("rope_scaling"),
        max_position_embeddings=cfg.get("max_position_embeddings", 4096),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        layer_types=list(cfg.get("layer_types") or ["full_attention"] * n_layers),
        bos_token_id=cfg.get("bos_token_id"),
        eos_token_ids=_eos_list(cfg.get("eos_token_id")),
        extra=cfg,
    )
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and rp.get("rope_type", "default") not in ("default", None) and not fields["rope_scaling"]:
        fields["rope_scaling"] = rp
    fields["rope_scaling"] = _checked_rope_scaling(fields["rope_scaling"], cfg)
    fields.update(overrides)
    return ModelConfig(**fields)


ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn")


def _checked_rope_scaling(scaling: dict | None, cfg: dict) -> dict | None:
    """The rope scaling the cos/sin table implements, with the pretraining context filled in as transformers
    does; a kind it does not implement is refused rather than silently dropped."""
    if not isinstance(scaling, dict):
        return None
    kind = scaling.get("rope_type", scaling.get("type")) or "default"
    if kind not in ROPE_TYPES:
        raise NinferError(f"rope_scaling of type {kind!r} is not supported (ninfer implements "
                          f"{', '.join(ROPE_TYPES)}); remove it from config.json to run at the native context.")
    if kind in ("llama3", "yarn") and "original_max_position_embeddings" not in scaling:
        old = cfg.get("original_max_position_embeddings") or cfg.get("max_position_embeddings", 4096)
        scaling = {**scaling, "original_max_position_embeddings": old}
    if kind in ("linear", "yarn") and not scaling.get("factor"):
        if kind == "yarn" and cfg.get("max_position_embeddings"):  # DeepSeek-V3's convention
            scaling = {**scaling, "factor": cfg["max_position_embeddings"] / scaling["original_max_position_embeddings"]}
        else:
            raise NinferError(f"rope_scaling of type {kind!r} has no factor; add it to config.json.")
    return scaling
