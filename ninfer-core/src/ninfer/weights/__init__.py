"""Checkpoint readers. Every reader yields the same thing: a Hugging Face style config dict,
Hugging Face tensor names, and tensors read lazily from a memory map (never pickle).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..errors import NinferError


class Checkpoint:
    """A model on disk. Readers subclass this; models only use these members."""

    path: str
    config: dict[str, Any]  # Hugging Face config.json shape (text config, flattened)
    generation_config: dict[str, Any]
    chat_template: str | None

    def tensor_names(self) -> list[str]:
        raise NotImplementedError

    def get(self, name: str) -> torch.Tensor:
        """The tensor under its Hugging Face name, on the CPU, read from the memory map."""
        raise NotImplementedError

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        raise NotImplementedError

    def tokenizer(self):
        raise NotImplementedError

    def special_tokens(self) -> dict[str, str | None]:
        """bos/eos token texts for the chat template."""
        return {}


def open_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Open a model directory or file with the first registered reader that accepts it."""
    from ..plugins import collect

    path = os.fspath(path)
    if not os.path.exists(path):
        raise NinferError(f"Model path {path!r} does not exist; pass a Hugging Face model directory or a .gguf file.")
    readers = collect("ninfer_register_weight_formats")
    for reader in readers:
        if reader.can_open(path):
            return reader.open(path)
    names = ", ".join(r.name for r in readers)
    raise NinferError(f"No reader recognises {path!r} (readers: {names}); pass a directory with config.json "
                      "and *.safetensors, or a .gguf file.")
