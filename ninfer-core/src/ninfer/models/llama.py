"""Llama (SmolLM2, Llama 3), Qwen2 and Qwen3: the same decoder with different options."""

from ..config.model import base_config
from . import ArchSpec, register_arch

register_arch(ArchSpec("LlamaForCausalLM", ("llama",), lambda c: base_config(c, "LlamaForCausalLM",
                       attention_bias=bool(c.get("attention_bias", False)),
                       o_bias=bool(c.get("attention_bias", False)), mlp_bias=bool(c.get("mlp_bias", False)))))
register_arch(ArchSpec("Qwen2ForCausalLM", ("qwen2",), lambda c: base_config(c, "Qwen2ForCausalLM",
                       attention_bias=True)))
register_arch(ArchSpec("Qwen3ForCausalLM", ("qwen3",), lambda c: base_config(c, "Qwen3ForCausalLM",
                       attention_bias=bool(c.get("attention_bias", False)),
                       o_bias=bool(c.get("attention_bias", False)), qk_norm=True)))
