"""Speculative decoding is lossless: with every drafter and combination, greedy output equals plain
greedy output token for token, on tiny random Llama, Qwen3 and Qwen3.5 (hybrid) models. Drafters that
keep their own cache (MTP, DFlash) must also propose exactly what a fresh drafter given the whole
sequence at once proposes, which checks their rollback to the accepted length."""

from __future__ import annotations

import pytest
import torch
from test_spec_support import add_mtp, hidden_probe, write_dflash

from ninfer import LLM, SamplingParams
from ninfer.drafting import DraftContext, Drafter, build_drafter
from ninfer.engine.speculative import _TargetHidden
from ninfer_testing import make_tiny_checkpoint

# a prompt that repeats, so lookup finds matches; random models also fall into loops lookup can follow
PROMPT = [5, 17, 42, 99, 123, 7, 5, 17, 42, 99, 123, 7, 5, 17, 42, 61, 250, 88, 5, 17]
GREEDY = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)


def _make(arch: str, path: str) -> None:
    if arch == "qwen3_5":
        from test_qwen3_5 import make_checkpoint

        make_checkpoint(path, multimodal=False, seed=3)
    else:
        make_tiny_checkpoint(arch, path, seed=3)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matrices: one thread is several times faster than two fighting over a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module", params=["llama", "qwen3", "qwen3_5"])
def tiny(request, tmp_path_factory, one_thread):
    arch = request.param
    path = str(tmp_path_factory.mktemp(arch) / "model")
    _make(arch, path)
    add_mtp(path, seed=4)
    layers = 6 if arch == "qwen3_5" else 3
    d1 = write_dflash(f"{path}/dflash", path, [0, layers - 2], seed=5)
    d2 = write_dflash(f"{path}/dflash2", path, [1, layers - 1], v2=True, seed=6)
    llm = LLM(path, progress=False, max_context=256)
    plain = llm.generate(PROMPT, GREEDY)
    return llm, plain, {"d1": d1, "d2": d2}


SPECS = ["lookup", "lookup:16,min=1,max=3", "mtp:1", "mtp:3", "mtp:3,hidden=pre", "dflash:{d1}",
         "dflash:{d2}", "dflash:{d1}+lookup:16", "mtp:2+lookup:8", "lookup:4+dflash:{d2}"]


@pytest.mark.parametrize("spec", SPECS)
def test_greedy_equals_plain(tiny, spec):
    llm, plain, paths = tiny
    llm.drafter = build_drafter(spec.format(**paths), llm)
    try:
        out = llm.generate(PROMPT, GREEDY)
    finally:
        llm.drafter = None
    s = out.stats
    print(f"{llm.config.architecture} {spec.split(':')[0]}: {s['generated_tokens'] / s['verify_steps']:.2f} "
          f"tok/step, {s['accepted_tokens']}/{s['drafted_tokens']} accepted, {s['drafters']}")
    assert out.token_ids == plain.token_ids
    # lookup drafts only when an n-gram repeats; the model drafters draft at every step
    assert s["drafted_tokens"] > 0 or spec == "lookup"
    assert s["verify_steps"] == s["generated_tokens"] - 1 - s["accepted_tokens"]
    assert sum(d["drafted"] for d in s["drafters"].values()) == s["drafted_tokens"]
    assert sum(d["accepted"] for d in s["drafters"].values()) == s["accepted_tokens"]


def test_stop_strings_and_length_behave_as_plain(tiny):
    llm, plain, _ = tiny
    text = llm.tokenizer.decode(plain.token_ids)
    stop = text[len(text) // 2: len(text) // 2 + 2]
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True, stop=[stop], logprobs=2)
    ref = llm.generate(PROMPT, params)
    llm.drafter = build_drafter("lookup:8,min=1", llm)
    try:
        got = llm.generate(PROMPT, params)
    finally:
        llm.drafter = None
    assert (got.text, got.finish_reason) == (ref.text, ref.finish_reason)
    assert [lp["token_id"] for lp in got.logprobs] == [lp["token_id"] for lp in ref.logprobs]
    assert [round(lp["logprob"], 4) for lp in got.logprobs] == [round(lp["logprob"], 4) for lp in ref.logprobs]


@pytest.mark.parametrize("spec", ["mtp:3", "mtp:2,hidden=pre", "dflash:{d1}", "dflash:{d2}",
                                  "mtp:3+lookup:8,min=1", "lookup:8,min=1+dflash:{d2}"])
def test_incremental_drafter_equals_fresh_drafter(tiny, spec):
    llm, _, paths = tiny
    spec = spec.format(**paths)
    calls = []
    d = build_drafter(spec, llm)
    inner = d.propose

    def spy(ctx):
        p = inner(ctx)
        calls.append((list(ctx.token_ids), ctx.max_tokens, p.tokens))
        return p

    d.propose = spy
    llm.drafter = d
    chunk = llm.runner.prefill_chunk
    llm.runner.prefill_chunk = 7  # the prompt in three chunks, which the drafter observes one by one
    try:
        llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True))
    finally:
        llm.drafter = None
        llm.runner.prefill_chunk = chunk
    assert len(calls) > 3
    seq, cap, tokens = calls[-1]
    fresh = build_drafter(spec, llm)
    fresh.reset()
    target = _TargetHidden(llm.runner, hidden_probe(fresh))
    target.prefill(seq[:-1])  # the whole sequence at once: no observe, no cache, no rollback
    ctx = DraftContext(seq, len(PROMPT), cap, 0, target.post, target.pre, target.layers)
    assert fresh.propose(ctx).tokens == tokens



class SpoiledOracle(Drafter):
    """Knows the plain output and proposes its next 5 tokens with the 4th one wrong: every step
    accepts 3 tokens and rolls back 2 (the partial-acceptance path on every model)."""

    name = "spoiled-oracle"

    def __init__(self, reference: list[int], vocab: int):
        super().__init__()
        self.ref, self.vocab = reference, vocab

    def propose(self, context):
        done = len(context.token_ids) - len(PROMPT)
        chain = self.ref[done: done + 5][: context.max_tokens]
        if len(chain) > 3:
            chain[3] = (chain[3] + 1) % self.vocab
        return chain


def test_rejections_roll_back_kv_and_state_without_recomputation(tiny):
    llm, plain, _ = tiny
    runner, state = llm.runner, llm.runner.state
    runner.reset()  # no prefix reuse: every truncate below comes from a rejection
    cuts, rollbacks, forwards = [], [], []
    truncate, forward = runner.truncate, runner.forward
    runner.truncate = lambda n: (cuts.append(len(runner.tokens) - n), truncate(n))[1]
    runner.forward = lambda ids, phase: (forwards.append(len(ids)), forward(ids, phase))[1]
    if state is not None:  # the hybrid: recurrent state goes back to a kept per-position snapshot
        rollback = state.rollback
        state.rollback = lambda old, new: (rollbacks.append(old - new), rollback(old, new))[1]
    llm.drafter = SpoiledOracle(plain.token_ids, llm.config.vocab_size)
    try:
        out = llm.generate(PROMPT, GREEDY)
    finally:
        llm.drafter = None
        del runner.truncate, runner.forward
        if state is not None:
            del state.rollback
    assert out.token_ids == plain.token_ids
    assert out.stats["drafted_tokens"] > out.stats["accepted_tokens"] > 0
    assert sum(cuts) == out.stats["drafted_tokens"] - out.stats["accepted_tokens"]
    # one prefill plus one forward per verify step: a rejection never re-runs accepted tokens
    assert len(forwards) == 1 + out.stats["verify_steps"]
    assert rollbacks == ([c for c in cuts if c] if state is not None else [])


def test_unknown_or_bad_drafter_is_one_clear_sentence(tiny):
    from ninfer.errors import NinferError

    llm, _, _ = tiny
    with pytest.raises(NinferError, match=r"Unknown drafter 'medusa'.*known drafters: .*dflash.*lookup.*mtp"):
        build_drafter("medusa:3", llm)
    with pytest.raises(NinferError, match="token count"):
        build_drafter("lookup:many", llm)
    with pytest.raises(NinferError, match="hidden=post or hidden=pre"):
        build_drafter("mtp:2,hidden=middle", llm)
    with pytest.raises(NinferError, match="does not exist"):
        build_drafter("dflash:/no/such/draft", llm)
    assert build_drafter("dflash", llm).path == f"{llm.model_path}/dflash"  # the default: beside the model
