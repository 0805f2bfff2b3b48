"""Speculative decoding on the real model (SmolLM2-135M, Q4_1 GGUF): greedy output with lookup, the
third-party echo drafter and their combination equals plain greedy output, and lookup on a
"repeat this passage" prompt verifies several tokens per target step."""

from __future__ import annotations

import pytest
import torch
from test_spec_support import install_echo_plugin, uninstall_echo_plugin

from ninfer import LLM, SamplingParams
from ninfer.drafting import build_drafter

PASSAGE = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
           "for i in range(10):\n    print(i, fibonacci(i))\n")


@pytest.fixture(scope="module")
def smol(smollm2_gguf):
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # batch-1 decode of a 135M model: one thread wastes less on a shared machine
    llm = LLM(smollm2_gguf, progress=False, max_context=512)
    prompt = llm.render_chat([{"role": "user", "content": "Copy this text exactly, without any changes:\n\n" + PASSAGE}])
    yield llm, llm.tokenizer.encode(prompt)
    torch.set_num_threads(n)


def _generate(llm, ids, spec, max_tokens):
    llm.drafter = build_drafter(spec, llm) if spec else None
    try:
        return llm.generate(ids, SamplingParams(temperature=0, max_tokens=max_tokens))
    finally:
        llm.drafter = None


def test_lookup_on_a_quoted_passage_is_lossless_and_fast(smol, monkeypatch):
    monkeypatch.setenv("NINFER_VERIFY_WIDTH", "adaptive")  # the default: widths chosen by measured cost
    llm, ids = smol
    plain = _generate(llm, ids, None, 40)
    out = _generate(llm, ids, "lookup:16", 40)
    s = out.stats
    per_step = s["generated_tokens"] / (s["verify_steps"] + 1)  # the prefill's token counts as a step
    print(f"\nSmolLM2 lookup:16 on a quoted passage: {per_step:.2f} tokens per target step "
          f"({s['generated_tokens']} tokens, {s['verify_steps']} verify steps + prefill, "
          f"{s['accepted_tokens']}/{s['drafted_tokens']} drafted tokens accepted)")
    assert out.token_ids == plain.token_ids and out.text == plain.text
    assert PASSAGE.splitlines()[0] in out.text  # it did quote the passage
    assert per_step > 3


def test_echo_and_combinations_are_lossless(smol, tmp_path):
    llm, ids = smol
    pythonpath = install_echo_plugin(str(tmp_path))
    assert pythonpath
    try:
        plain = _generate(llm, ids, None, 10)
        for spec in ("echo", "echo:3+lookup:8"):
            out = _generate(llm, ids, spec, 10)
            assert out.token_ids == plain.token_ids, spec
            assert out.stats["drafters"]["echo"]["drafted"] > 0, spec
    finally:
        uninstall_echo_plugin(str(tmp_path))
