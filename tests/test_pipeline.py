"""Decode one step ahead of the host (ninfer.engine.pipeline) against the plain loop, on the real SmolLM2 model and
on a small random hybrid (qwen3_5) model: the same tokens, text, finish reasons and stats, and the runner left with
the same cache. NINFER_PIPELINE=1 forces the pipeline on the CPU (its default there is off); =0 the plain loop."""

from __future__ import annotations

import pytest

from ninfer import LLM, SamplingParams
from ninfer.engine import pipeline

PROMPT = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
SHORT = [{"role": "user", "content": "What is the capital of France?"}]  # answered in ~8 tokens, then EOS


@pytest.fixture(scope="module")
def llm():
    return LLM(progress=False)  # the embedded default model


def _both(llm, params, monkeypatch, prompt=None):
    """(plain, pipelined): each run's Output and the runner's tokens after it, from the same empty cache."""
    prompt = prompt if prompt is not None else llm.render_chat(PROMPT)
    runs = []
    for mode in ("0", "1"):
        monkeypatch.setenv("NINFER_PIPELINE", mode)
        llm.runner.reset()
        out = llm.generate(prompt, params)
        runs.append((out, list(llm.runner.tokens)))
    return runs


def _used(monkeypatch) -> list:
    made = []
    real = pipeline.DecodePipeline

    def spy(*a, **kw):
        made.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(pipeline, "DecodePipeline", spy)
    return made


@pytest.mark.parametrize("params,chat,finish", [
    (SamplingParams(temperature=0.0, max_tokens=24), SHORT, "stop"),  # ends on EOS
    (SamplingParams(temperature=0.0, max_tokens=7), PROMPT, "length"),
    (SamplingParams(temperature=0.0, max_tokens=16, stop=["3"]), PROMPT, "stop"),  # a stop string
    (SamplingParams(temperature=0.0, max_tokens=1), PROMPT, "length"),  # no decode step at all
    (SamplingParams(temperature=0.8, top_p=0.9, top_k=40, seed=7, max_tokens=12), PROMPT, None),  # seeded sampling
    (SamplingParams(temperature=1.0, min_p=0.05, seed=3, max_tokens=12, ignore_eos=True), PROMPT, "length"),
], ids=["eos", "length", "stop-string", "one-token", "top-p-top-k", "min-p"])
def test_pipelined_equals_plain_loop(llm, params, chat, finish, monkeypatch):
    made = _used(monkeypatch)
    (plain, plain_tokens), (piped, piped_tokens) = _both(llm, params, monkeypatch, llm.render_chat(chat))
    assert made == [1]  # the second run took the pipeline
    assert piped.token_ids == plain.token_ids and piped.text == plain.text
    assert piped.finish_reason == plain.finish_reason
    assert finish is None or plain.finish_reason == finish
    assert piped.stats["verify_steps"] == plain.stats["verify_steps"] == len(plain.token_ids) - 1
    # the step past the last token is rolled back (an attention-only model): the same cache, no pending token
    assert piped_tokens == plain_tokens
    assert -1 not in piped_tokens


def test_stop_token_ids_in_the_pipeline(llm, monkeypatch):
    base = llm.generate(llm.render_chat(PROMPT), SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True))
    params = SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=[base.token_ids[4]])
    (plain, plain_tokens), (piped, piped_tokens) = _both(llm, params, monkeypatch)
    assert piped.token_ids == plain.token_ids == base.token_ids[:base.token_ids.index(base.token_ids[4]) + 1]
    assert piped.finish_reason == "stop" and piped_tokens == plain_tokens


def test_a_consumer_that_stops_early_leaves_a_consistent_cache(llm, monkeypatch):
    monkeypatch.setenv("NINFER_PIPELINE", "1")
    prompt_ids = llm.tokenizer.encode(llm.render_chat(PROMPT))
    llm.runner.reset()
    got = []
    for chunk in llm.generate_stream(prompt_ids, SamplingParams(temperature=0.0, max_tokens=16)):
        got.extend(chunk.token_ids)
        if len(got) >= 5:
            break
    # the stream is closed: the cache holds the prompt and the tokens whose successors were computed, no
    # pending placeholder and no step past what was read
    tokens = llm.runner.tokens
    assert -1 not in tokens
    assert tokens[:len(prompt_ids)] == prompt_ids
    assert tokens[len(prompt_ids):] == got[:len(tokens) - len(prompt_ids)]
    assert len(tokens) == len(prompt_ids) + len(got) - 1
    # and the next request reuses that prefix and continues exactly as a fresh one
    monkeypatch.setenv("NINFER_PIPELINE", "0")
    fresh = llm.generate(prompt_ids, SamplingParams(temperature=0.0, max_tokens=6))
    monkeypatch.setenv("NINFER_PIPELINE", "1")
    again = llm.generate(prompt_ids, SamplingParams(temperature=0.0, max_tokens=6))
    assert again.token_ids == fresh.token_ids


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0.0, max_tokens=5, repetition_penalty=1.3),
    SamplingParams(temperature=0.7, seed=1, max_tokens=5, frequency_penalty=0.5),
    SamplingParams(temperature=0.0, max_tokens=5, logprobs=2),
], ids=["repetition-penalty", "frequency-penalty", "logprobs"])
def test_what_needs_the_host_keeps_the_plain_loop(llm, params, monkeypatch):
    made = _used(monkeypatch)
    (plain, _), (other, _) = _both(llm, params, monkeypatch)
    assert made == []  # penalties read the output so far, logprobs the logits: both on the host, step by step
    assert other.token_ids == plain.token_ids


def test_hybrid_model_pipelined_equals_plain_loop(tmp_path, monkeypatch):
    """A random Gated DeltaNet + attention model (qwen3_5, transformers' own checkpoint): the same greedy tokens; its
    recurrent state cannot roll one step back, so the step past a stop keeps the stop token in the cache, and the
    length limit runs no step past it."""
    from test_qwen3_5 import make_checkpoint

    make_checkpoint(str(tmp_path / "m"), multimodal=False, seed=3)
    hybrid = LLM(str(tmp_path / "m"), progress=False, max_context=128)
    assert hybrid.runner.state is not None
    prompt = [5, 17, 42, 99, 123, 7, 5, 17, 42, 61, 250, 88]
    (plain, plain_tokens), (piped, piped_tokens) = _both(
        hybrid, SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True), monkeypatch, prompt)
    assert piped.token_ids == plain.token_ids and piped.finish_reason == plain.finish_reason == "length"
    assert piped_tokens == plain_tokens
    stop = plain.token_ids[5]
    params = SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True, stop_token_ids=[stop])
    (plain, plain_tokens), (piped, piped_tokens) = _both(hybrid, params, monkeypatch, prompt)
    assert piped.token_ids == plain.token_ids == plain.token_ids[:plain.token_ids.index(stop) + 1]
    assert piped_tokens == plain_tokens + [stop]  # fed to the step past it, and kept
    # a next prompt that continues with the stop token reuses the cache, and decodes as a fresh run does
    follow = prompt + piped.token_ids + [9, 10]
    monkeypatch.setenv("NINFER_PIPELINE", "1")
    again = hybrid.generate(follow, SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True))
    hybrid.runner.reset()
    fresh = hybrid.generate(follow, SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True))
    assert again.token_ids == fresh.token_ids
