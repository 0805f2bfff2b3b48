"""Random-weight models of real shapes, built straight into GPU memory (no checkpoint on disk).

Used by bench/decode.py and the GPU conformance suite: the same seeded weights go into a model on
any backend, so a kernel backend and the reference backend can be compared on one model.
"""

from __future__ import annotations

import torch

# Hugging Face config dicts of the shapes we measure (text models; weights are random)
SHAPES = {
    "llama3-8b": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=4096,
                      intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=128, vocab_size=128256, rope_theta=500000.0,
                      rms_norm_eps=1e-5, max_position_embeddings=131072, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen3-8b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=4096,
                     intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, vocab_size=151936, rope_theta=1e6, rms_norm_eps=1e-6,
                     max_position_embeddings=40960, tie_word_embeddings=False),
    "qwen3.5-27b": dict(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text", hidden_size=5120,
                        intermediate_size=17408, num_hidden_layers=64, num_attention_heads=24,
                        num_key_value_heads=4, head_dim=256, vocab_size=248320, linear_num_key_heads=16,
                        linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
                        linear_conv_kernel_dim=4, full_attention_interval=4, partial_rotary_factor=0.25,
                        rope_theta=10_000_000.0, rms_norm_eps=1e-6, max_position_embeddings=262144,
                        tie_word_embeddings=False, attn_output_gate=True),
}


def shape_config(name: str, layers: int | None = None) -> dict:
    cfg = dict(SHAPES[name])
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    return cfg


def _targets(model):
    """Every weight slot of a ninfer CausalLM: (path, owner, attribute, shape, kind)."""
    from ninfer.layers.linear import Linear
    from ninfer.layers.norm import RMSNorm

    out = []
    cfg = model.cfg
    out.append(("embed_tokens", model, "embed_tokens", (cfg.vocab_size, cfg.hidden_size), "embed"))

    def walk(obj, path):
        if isinstance(obj, Linear):
            out.append((f"{path}.weight", obj, "weight", (obj.out_features, obj.in_features), "linear"))
            if obj.has_bias:
                out.append((f"{path}.bias", obj, "bias", (obj.out_features,), "bias"))
            return
        if isinstance(obj, RMSNorm):
            out.append((f"{path}.weight", obj, "weight", (obj.dim,), "norm_zc" if obj.zero_centered else "norm"))
            return
        shape = getattr(obj, "shape", None)
        if shape is not None and hasattr(obj, "conv_weight"):  # Gated DeltaNet mixer
            out.append((f"{path}.conv_weight", obj, "conv_weight", (shape.conv_dim, 1, shape.conv_kernel), "conv"))
            out.append((f"{path}.A_log", obj, "A_log", (shape.value_heads,), "small"))
            out.append((f"{path}.dt_bias", obj, "dt_bias", (shape.value_heads,), "small"))
            out.append((f"{path}.norm_weight", obj, "norm_weight", (shape.value_dim,), "norm"))
        for name, child in vars(obj).items():
            if name in ("ops", "cfg", "shape") or isinstance(child, torch.Tensor):
                continue
            if isinstance(child, list):
                for i, c in enumerate(child):
                    if hasattr(c, "__dict__"):
                        walk(c, f"{path}.{name}.{i}")
            elif hasattr(child, "__dict__"):
                walk(child, f"{path}.{name}")

    for name in ("layers", "norm", "lm_head"):
        walk(getattr(model, name), name) if name != "layers" else [
            walk(layer, f"layers.{i}") for i, layer in enumerate(model.layers)]
    return out


def random_weights(model, dtype: torch.dtype, device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Seeded random weights for every slot of ``model`` (O(1) activations at any depth)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    weights = {}
    for path, _, _, shape, kind in _targets(model):
        t = torch.empty(shape, dtype=torch.float32, device=device)
        if kind == "linear":
            t.normal_(0, shape[1] ** -0.5, generator=gen)
        elif kind == "embed":
            t.normal_(0, 1, generator=gen)
        elif kind == "norm":
            t.normal_(1, 0.1, generator=gen)
        elif kind == "norm_zc":
            t.normal_(0, 0.1, generator=gen)
        elif kind == "conv":
            t.normal_(0, 0.5, generator=gen)
        else:  # bias, A_log, dt_bias
            t.normal_(0, 0.5, generator=gen)
        weights[path] = t.to(dtype)
    return weights


def build(name_or_cfg, backend: str, device, dtype: torch.dtype, max_context: int, layers: int | None = None,
          weights: dict | None = None, seed: int = 0):
    """(runner, weights): a ModelRunner over a random-weight model of the named shape on ``backend``."""
    from ninfer.config.model import model_config_from_hf
    from ninfer.engine.runner import ModelRunner
    from ninfer.models import ARCHITECTURES
    from ninfer.models.decoder import CausalLM
    from ninfer.ops import DeviceSpec, resolve

    raw = shape_config(name_or_cfg, layers) if isinstance(name_or_cfg, str) else name_or_cfg
    cfg = model_config_from_hf(raw)
    device = torch.device(device)
    ops = resolve(backend, DeviceSpec.of(device, dtype))
    model = CausalLM(cfg, ops)
    if weights is None:
        weights = random_weights(model, dtype, device, seed)
    for path, owner, attr, _, _ in _targets(model):
        setattr(owner, attr, weights[path])
    arch = ARCHITECTURES[cfg.architecture]
    factory = getattr(arch, "state_factory", None)
    runner = ModelRunner(model, cfg, device, dtype, max_context,
                         state_factory=(lambda: factory(cfg, device)) if factory else None)
    return runner, weights


def weight_bytes(weights: dict) -> int:
    """Bytes a decode step reads from the weights: all but the embedding table (one row of it)."""
    return sum(t.numel() * t.element_size() for p, t in weights.items() if p != "embed_tokens")
