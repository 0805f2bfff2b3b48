"""Architectures: each maps a Hugging Face config onto the one decoder and names its weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ArchSpec:
    name: str  # the Hugging Face class name, e.g. "LlamaForCausalLM"
    model_types: tuple[str, ...]
    config: Callable  # HF config dict -> ModelConfig
    # checkpoint name candidates for a canonical name ("model.layers.0...." / "lm_head.weight")
    names: Callable[[str], list[str]] = lambda n: [n]


ARCHITECTURES: dict[str, ArchSpec] = {}


def register_arch(spec: ArchSpec) -> ArchSpec:
    ARCHITECTURES[spec.name] = spec
    return spec


def _load_builtin():
    from . import llama, qwen3_5  # noqa: F401


_load_builtin()
