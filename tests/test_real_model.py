"""The real SmolLM2-135M-Instruct GGUF: ninfer against transformers loading the same file."""

from __future__ import annotations

import pytest
import torch

from ninfer import LLM, SamplingParams

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You answer in one short sentence."},
     {"role": "user", "content": "Why is the sky blue?"}],
]


@pytest.fixture(scope="module")
def llm():
    return LLM(progress=False)  # the embedded default model


@pytest.fixture(scope="module")
def hf(smollm2_hf):
    return smollm2_hf


def test_default_model_answers_paris(llm):
    out = llm.chat(CHATS[0], SamplingParams(temperature=0.0, max_tokens=24))
    assert "Paris" in out.text
    assert out.finish_reason == "stop"


@pytest.mark.parametrize("chat", CHATS)
def test_greedy_continuation_equals_transformers(llm, hf, chat):
    ids = llm.tokenizer.encode(llm.render_chat(chat))
    out = llm.generate(ids, SamplingParams(temperature=0.0, max_tokens=20))
    with torch.no_grad():  # both stop at EOS (<|im_end|>, id 2), which each returns as the last token
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=2,
                          pad_token_id=0)[0, len(ids):].tolist()
    assert out.token_ids == ref


def test_logits_equal_transformers(llm, hf):
    ids = llm.tokenizer.encode(llm.render_chat(CHATS[1]))
    logits = llm.runner.prefill(ids)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(logits, ref, rtol=1e-3, atol=1e-3)


def test_stream_pieces_join_to_generate_text(llm):
    params = SamplingParams(temperature=0.0, max_tokens=16)
    prompt = llm.render_chat(CHATS[0])
    assert "".join(llm.stream(prompt, params)) == llm.generate(prompt, params).text


def test_stop_string_ends_generation_and_is_not_returned(llm):
    prompt = llm.render_chat([{"role": "user", "content": "Count from 1 to 10, separated by commas."}])
    full = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=40)).text
    assert "5" in full
    cut = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=40, stop=["5"]))
    assert cut.finish_reason == "stop" and "5" not in cut.text
    assert full.startswith(cut.text)


def test_stop_token_ids_and_ignore_eos(llm):
    prompt = llm.render_chat(CHATS[0])
    base = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True))
    stop_at = base.token_ids[3]
    out = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=[stop_at]))
    assert out.token_ids == base.token_ids[:base.token_ids.index(stop_at) + 1]
    assert out.finish_reason == "stop"
    assert len(base.token_ids) == 12 and base.finish_reason == "length"


def test_seeded_sampling_repeats(llm):
    prompt = llm.render_chat(CHATS[1])
    p = SamplingParams(temperature=0.9, top_p=0.95, seed=123, max_tokens=12)
    assert llm.generate(prompt, p).token_ids == llm.generate(prompt, p).token_ids
