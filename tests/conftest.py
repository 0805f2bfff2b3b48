"""Shared fixtures: the real SmolLM2 GGUF (and transformers' model of it), loaded once per run."""

from __future__ import annotations

import os

import pytest
import torch

from ninfer_testing import smollm2_path


@pytest.fixture(autouse=True)
def _verify_full_chains(monkeypatch):
    """Speculative tests verify every chain a drafter proposes (the losslessness checks must exercise
    long chains even where a random-weight drafter is never right); the adaptive width choice
    (ninfer.engine.width) is tested where a test sets NINFER_VERIFY_WIDTH=adaptive."""
    monkeypatch.setenv("NINFER_VERIFY_WIDTH", "max")


@pytest.fixture(scope="session")
def smollm2_gguf() -> str:
    return smollm2_path()


@pytest.fixture(scope="session")
def smollm2_hf(smollm2_gguf):
    """transformers' own model from the same GGUF (it dequantises to float32); loaded once per run."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(os.path.dirname(smollm2_gguf),
                                                gguf_file=os.path.basename(smollm2_gguf),
                                                dtype=torch.float32).eval()
