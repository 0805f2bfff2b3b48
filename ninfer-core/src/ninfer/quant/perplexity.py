"""Perplexity of a text under a loaded model: exp(mean negative log-likelihood of each next token).

The text is run through the engine's own runner (the same paged KV cache, KV format and GEMMs as
generation), in chunks, so quantised KV is read back exactly as decode reads it. Texts longer
than the context are scored in consecutive windows, each starting from an empty cache.
"""

from __future__ import annotations

import math

import torch

from ..errors import NinferError


@torch.inference_mode()
def negative_log_likelihoods(llm, ids: list[int], chunk: int = 512) -> torch.Tensor:
    """float64 [n-1]: -log p(ids[i+1] | ids[:i+1]) for every token after the first of each window."""
    runner = llm.runner
    window = llm.max_context
    out = []
    for w0 in range(0, len(ids) - 1, window):
        win = ids[w0: w0 + window + 1]  # the last token is only a target
        runner.reset()
        for c0 in range(0, len(win) - 1, chunk):
            inputs = win[c0: min(c0 + chunk, len(win) - 1)]
            targets = torch.tensor(win[c0 + 1: c0 + 1 + len(inputs)], dtype=torch.int64)
            hidden = runner.forward(inputs, "prefill")  # [T, H]
            logp = torch.log_softmax(llm.model.logits(hidden).float(), dim=-1).cpu()  # [T, V]
            out.append(-logp.gather(1, targets[:, None])[:, 0].double())
    runner.reset()
    return torch.cat(out)


@torch.inference_mode()
def log_probabilities(llm, ids: list[int]) -> torch.Tensor:
    """float32 [n-1, V]: log p(. | ids[:i+1]) for every prefix, from one prefill of ids[:-1] on an empty cache."""
    runner = llm.runner
    runner.reset()
    try:
        return torch.log_softmax(llm.model.logits(runner.forward(ids[:-1], "prefill")).float(), dim=-1)
    finally:
        runner.reset()


def perplexity(llm, text: str) -> float:
    ids = llm.tokenizer.encode(text)  # no BOS: the first token is context only, never scored
    if len(ids) < 2:
        raise NinferError("Perplexity needs a text of at least two tokens; pass a longer text.")
    return math.exp(float(negative_log_likelihoods(llm, ids).mean()))
