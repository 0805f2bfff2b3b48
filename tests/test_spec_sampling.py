"""Sampling with drafters keeps plain sampling's distribution (chi-square tests).

Unit level: the acceptance rule (accept with min(1, p/q), resample from (p - q)+) over a 6-token
vocabulary and many draws, for a deterministic drafter (one-hot q) and a sampling drafter (q given),
against the plain sampler's own distribution; a naive rule that always accepts must fail the same
test, so the test has power. End to end: a tiny random Llama, the first four tokens over many seeds,
plain against speculative, as two samples of one distribution.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_spec_support import add_mtp, write_dflash

from ninfer import LLM, SamplingParams
from ninfer.drafting import Drafter, Proposal, build_drafter
from ninfer.engine.runner import ModelRunner
from ninfer.engine.sampler import Sampler
from ninfer.engine.speculative import accept
from ninfer_testing import make_tiny_checkpoint

V = 6


def chi2_pvalue(stat: float, df: int) -> float:
    """Upper tail of the chi-square distribution: Q(df/2, stat/2)."""
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def goodness_of_fit(samples: list[int], probs: torch.Tensor) -> float:
    counts = torch.bincount(torch.tensor(samples), minlength=len(probs)).double()
    expected = probs.double() * len(samples)
    keep = expected > 0
    if counts[~keep].sum() > 0:
        return 0.0  # a token of probability 0 was emitted
    stat = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    return chi2_pvalue(stat, int(keep.sum()) - 1)


def homogeneity(a: list, b: list, min_count: int = 10) -> float:
    """Two samples of categories come from one distribution; rare categories are pooled."""
    cats = sorted(set(a) | set(b), key=str)
    ca = {c: a.count(c) for c in cats}
    cb = {c: b.count(c) for c in cats}
    rows, other = [], [0, 0]
    for c in cats:
        if ca[c] + cb[c] >= min_count:
            rows.append([ca[c], cb[c]])
        else:
            other[0] += ca[c]
            other[1] += cb[c]
    if sum(other):
        rows.append(other)
    t = torch.tensor(rows, dtype=torch.float64)
    exp = t.sum(1, keepdim=True) * t.sum(0, keepdim=True) / t.sum()
    return chi2_pvalue(float(((t - exp) ** 2 / exp).sum()), len(rows) - 1)


def _run(acceptor, params, logits, draft_fn, n, prompt, out):
    """Emitted tokens per trial: position 0 always, 1 and 2 when the earlier drafts were accepted."""
    sampler = Sampler(dataclasses.replace(params, seed=7), torch.device("cpu"))  # deterministic: no flakes
    gen = torch.Generator().manual_seed(123)
    firsts, seconds, thirds = [], [], []
    for _ in range(n):
        draft, q_rows = draft_fn(gen)
        n_acc, nxt = acceptor(logits, draft, q_rows, sampler, prompt, out)
        emitted = draft[:n_acc] + [nxt]
        firsts.append(emitted[0])
        if n_acc >= 1:
            seconds.append(emitted[1])
        if n_acc >= 2:
            thirds.append(emitted[2])
    return firsts, seconds, thirds


def _plain_probs(params, logits, draft, prompt, out):
    """What the plain sampler would draw from at each position, given the drafts before it."""
    s = Sampler(params, torch.device("cpu"))
    return [s.probs(s.penalise(logits[i].clone(), prompt, out + draft[:i])) for i in range(logits.shape[0])]


def always_accept(logits, draft, q_rows, sampler, prompt, out):
    return len(draft), sampler.draw(sampler.probs(logits[-1].clone()))


CASES = {
    # deterministic drafter (q one-hot), with a repetition penalty over the hypothetical output
    "one-hot": dict(params=SamplingParams(temperature=1.0, repetition_penalty=1.3), sampled=False),
    # a drafter that samples from its own q, and top-k + temperature on the target side
    "sampled-q": dict(params=SamplingParams(temperature=0.8, top_k=4), sampled=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_acceptance_rule_emits_the_plain_distribution(case):
    params, sampled = CASES[case]["params"], CASES[case]["sampled"]
    torch.manual_seed(0)
    logits = torch.randn(3, V) * 1.5  # rows for [last, d1, d2]
    q = torch.softmax(logits[:2] * 1.3 + torch.randn(2, V) * 0.7, dim=-1)  # near p, not equal
    fixed = logits[:2].argmax(dim=-1).tolist()  # likely drafts, so all three positions get samples
    prompt, out = [1, 2], [3]

    def draft_fn(gen):
        if not sampled:
            return fixed, [None, None]
        return [int(torch.multinomial(q[i], 1, generator=gen)) for i in range(2)], [q[0], q[1]]

    n = 12000
    firsts, seconds, thirds = _run(accept, params, logits, draft_fn, n, prompt, out)
    if sampled:  # rows 1 and 2 do not depend on which draft came before (no penalties here)
        p = _plain_probs(params, logits, [0, 0], prompt, out)
    else:
        p = _plain_probs(params, logits, fixed, prompt, out)
    for got, probs in ((firsts, p[0]), (seconds, p[1]), (thirds, p[2])):
        assert len(got) > 500
        assert goodness_of_fit(got, probs) > 1e-3
    # the same test rejects a rule that accepts every draft
    bad, _, _ = _run(always_accept, params, logits, draft_fn, 3000, prompt, out)
    assert goodness_of_fit(bad, p[0]) < 1e-6


class SampledDraft(Drafter):
    """Drafts two tokens by sampling the target itself at a hotter temperature (so q != p) through a
    runner of its own; seeded from the request's seed so drafts are independent across requests."""

    name = "hot-self"

    def __init__(self, llm):
        super().__init__(llm)
        self.runner = ModelRunner(llm.model, llm.config, llm.device, llm.dtype, 64)

    def propose(self, context):
        gen = torch.Generator().manual_seed(context.params.seed * 1009 + len(context.token_ids))
        logits = self.runner.prefill(context.token_ids)
        toks, rows = [], []
        for _ in range(min(2, context.max_tokens)):
            top = torch.topk(logits, 4)  # the target keeps its top 3: q covers those and one more
            q = torch.zeros_like(logits).scatter(0, top.indices, torch.softmax(top.values / 1.6, dim=-1))
            t = int(torch.multinomial(q, 1, generator=gen))
            toks.append(t)
            rows.append(q)
            logits = self.runner.decode(t)
        return Proposal(toks, rows, self.name)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster on a busy machine
    path = str(tmp_path_factory.mktemp("llama") / "model")
    make_tiny_checkpoint("llama", path, seed=11)
    add_mtp(path, seed=12)
    write_dflash(f"{path}/dflash", path, [0, 1], seed=13)
    write_dflash(f"{path}/dflash2", path, [0, 2], v2=True, seed=14)
    llm = LLM(path, progress=False, max_context=64)
    yield llm, {}
    torch.set_num_threads(n)


PROMPT = [10, 20, 30, 40, 50]
N = 300


def _sample(llm, drafter):
    llm.drafter = drafter
    seqs, stats = [], {"drafted_tokens": 0, "accepted_tokens": 0}
    try:
        for seed in range(N):
            o = llm.generate(PROMPT, SamplingParams(temperature=1.0, top_k=3, max_tokens=4, seed=seed,
                                                    ignore_eos=True))
            seqs.append(tuple(o.token_ids))
            for k in stats:
                stats[k] += o.stats.get(k, 0)
    finally:
        llm.drafter = None
    return seqs, stats


@pytest.mark.parametrize("spec", ["hot-self", "mtp:2", "dflash", "dflash:{model}/dflash2"])
def test_speculative_sampling_matches_plain_sampling_end_to_end(tiny_llama, spec):
    """hot-self drafts well (both acceptance and rejection happen often); the random-weight MTP and
    DFlash heads draft by sampling their own distributions q, which must not bias the output either."""
    llm, cache = tiny_llama
    if "plain" not in cache:
        cache["plain"] = _sample(llm, None)[0]
    plain = cache["plain"]
    drafter = SampledDraft(llm) if spec == "hot-self" else build_drafter(spec.format(model=llm.model_path), llm)
    spec_seqs, st = _sample(llm, drafter)
    print(f"{spec}: drafted {st['drafted_tokens']}, accepted {st['accepted_tokens']}")
    assert st["drafted_tokens"] > 0
    if spec == "hot-self":
        assert 0 < st["accepted_tokens"] < st["drafted_tokens"]
    for pos in range(4):
        assert homogeneity([s[pos] for s in plain], [s[pos] for s in spec_seqs]) > 1e-3
    assert homogeneity([s[:2] for s in plain], [s[:2] for s in spec_seqs]) > 1e-3  # a joint distribution


def test_model_drafters_sample_their_drafts_when_the_request_samples(tiny_llama):
    """For temperature > 0 the MTP, DFlash and DFlash2 drafts come with the distribution they were drawn from."""
    llm, _ = tiny_llama
    for spec in ("mtp:2", "dflash", f"dflash:{llm.model_path}/dflash2"):
        d = build_drafter(spec, llm)
        seen = []
        inner = d.propose
        d.propose = lambda ctx, inner=inner, seen=seen: seen.append(inner(ctx)) or seen[-1]
        llm.drafter = d
        try:
            llm.generate(PROMPT, SamplingParams(temperature=0.7, max_tokens=3, seed=1, ignore_eos=True))
            assert seen and all(p.probs is not None and len(p.probs) == len(p.tokens) for p in seen)
            for p in seen:
                for t, q in zip(p.tokens, p.probs):
                    assert abs(float(q.sum()) - 1) < 1e-4 and float(q[t]) > 0
            seen.clear()
            llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=3, ignore_eos=True))
            assert seen and all(p.probs is None for p in seen)  # greedy: deterministic drafts
        finally:
            llm.drafter = None
