"""The drafter API: spec strings, the registry, lookup matching, composition rules, and a third-party
drafter package installed with its own entry point, listed by `ninfer plugins` and used by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from test_spec_support import install_echo_plugin, uninstall_echo_plugin

from ninfer import LLM, SamplingParams
from ninfer.drafting import Composite, DraftContext, Drafter, Proposal, build_drafter, parse_spec
from ninfer.errors import NinferError
from ninfer_drafters.lookup import LookupDrafter, find_continuation
from ninfer_testing import make_tiny_checkpoint


def test_parse_spec():
    assert parse_spec("dflash+lookup:16,min=3") == [("dflash", None, {}), ("lookup", "16", {"min": "3"})]
    assert parse_spec("mtp:3") == [("mtp", "3", {})]
    with pytest.raises(NinferError, match="empty part"):
        parse_spec("lookup+")
    with pytest.raises(NinferError, match="key=value"):
        parse_spec("lookup:4,min")


def naive_lookup(seq, k, lo, hi):
    """The specification, written plainly: longest n first, most recent earlier occurrence."""
    for n in range(min(hi, len(seq) - 1), lo - 1, -1):
        suffix = seq[-n:]
        for start in range(len(seq) - n - 1, -1, -1):
            if seq[start: start + n] == suffix:
                return seq[start + n: start + n + k]
    return []


def test_lookup_matches_the_plain_specification():
    rng = np.random.default_rng(0)
    for trial in range(300):
        seq = rng.integers(0, 4 if trial % 2 else 9, size=int(rng.integers(2, 40))).tolist()
        k, lo = int(rng.integers(1, 8)), int(rng.integers(1, 3))
        hi = lo + int(rng.integers(0, 4))
        d = LookupDrafter(arg=str(k), min=str(lo), max=str(hi))
        got = d.propose(DraftContext(seq, 1, 100)).tokens
        assert got == naive_lookup(seq, k, lo, hi), (seq, k, lo, hi)


def test_lookup_prefers_longest_then_most_recent():
    seq = [1, 2, 3, 9, 7, 2, 3, 8, 5, 1, 2, 3]
    # the 3-gram [1, 2, 3] occurred at 0 (followed by 9); the 2-gram [2, 3] more recently (followed by 8)
    assert find_continuation(np.array(seq), 3, 2) == [9, 7]
    assert find_continuation(np.array(seq), 2, 2) == [8, 5]
    assert LookupDrafter(arg="2").propose(DraftContext(seq, 1, 10)).tokens == [9, 7]
    assert LookupDrafter(arg="8").propose(DraftContext(seq, 1, 3)).tokens == [9, 7, 2]  # capped by max_tokens
    with pytest.raises(NinferError, match="min <= max"):
        LookupDrafter(min="4", max="2")
    with pytest.raises(NinferError, match="no option 'size'"):
        LookupDrafter(size="3")


class Fixed(Drafter):
    def __init__(self, name, tokens, override=False):
        super().__init__()
        self.name, self.tokens, self.override = name, tokens, override

    def propose(self, context):
        return Proposal(list(self.tokens), None, self.name, override=self.override)


def test_composition_rules():
    ctx = DraftContext([1, 2], 1, 20)
    model = Fixed("dflash", [5, 6, 7, 8])
    # a long lookup match overrides the model's chain
    p = Composite([model, Fixed("lookup", [5, 9, 9, 9, 9, 9], override=True)]).propose(ctx)
    assert p.tokens == [5, 9, 9, 9, 9, 9] and p.source == ["lookup"] * 6
    # a short match that agrees extends the block while it matches; one that disagrees is ignored
    p = Composite([model, Fixed("lookup", [5, 6, 7, 8, 1, 2])]).propose(ctx)
    assert p.tokens == [5, 6, 7, 8, 1, 2] and p.source == ["dflash"] * 4 + ["lookup"] * 2
    assert Composite([model, Fixed("lookup", [5, 0, 0, 0, 0, 0])]).propose(ctx).tokens == [5, 6, 7, 8]
    # a strong but shorter chain that agrees keeps the model's tail and takes the credit
    p = Composite([model, Fixed("lookup", [5, 6], override=True)]).propose(ctx)
    assert p.tokens == [5, 6, 7, 8] and p.source == ["lookup", "lookup", "dflash", "dflash"]
    # nothing from the model: lookup alone
    assert Composite([Fixed("dflash", []), Fixed("lookup", [3])]).propose(ctx).tokens == [3]


@pytest.fixture(scope="module")
def echo_env(tmp_path_factory):
    where = str(tmp_path_factory.mktemp("site"))
    pythonpath = install_echo_plugin(where)
    yield pythonpath
    uninstall_echo_plugin(where)


def _cli(args, pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return subprocess.run([sys.executable, "-m", "ninfer.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_third_party_drafter_is_listed_by_ninfer_plugins(echo_env):
    r = _cli(["plugins", "--json"], echo_env)
    assert r.returncode == 0, r.stderr
    listed = {p["name"]: p for p in json.loads(r.stdout)}
    assert listed["echo"]["distribution"] == "ninfer-echo-drafter"
    assert listed["echo"]["version"] == "0.0.1"
    assert listed["echo"]["hooks"] == ["ninfer_register_drafters"]
    assert "ninfer_register_drafters" in listed["drafters"]["hooks"]  # ninfer-drafters itself


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("qwen3") / "model")
    make_tiny_checkpoint("qwen3", path, seed=7)
    return path


def test_third_party_drafter_is_used_by_name(echo_env, tiny_qwen3):
    d = build_drafter("echo:3", None)
    assert type(d).__name__ == "EchoDrafter" and d.propose(DraftContext([4, 5], 1, 10)) == [5, 5, 5]
    with pytest.raises(NinferError, match="known drafters: dflash, echo, lookup, mtp"):
        build_drafter("ech0", None)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        params = SamplingParams(temperature=0, max_tokens=30, ignore_eos=True)
        plain = LLM(tiny_qwen3, progress=False, max_context=128).generate([7, 8, 9, 7, 8], params)
        for spec in ("echo", "echo:4+lookup:8,min=1", "lookup:8,min=1+echo"):
            out = LLM(tiny_qwen3, progress=False, max_context=128, draft=spec).generate([7, 8, 9, 7, 8], params)
            assert out.token_ids == plain.token_ids, spec
            assert out.stats["drafters"]["echo"]["drafted"] > 0
    finally:
        torch.set_num_threads(n)


def test_ninfer_run_prints_tokens_per_step_and_acceptance(echo_env, tiny_qwen3):
    r = _cli(["run", "--model", tiny_qwen3, "--raw", "--max-tokens", "12", "--draft", "echo+lookup:8,min=1",
              "abcabcabc"], echo_env)
    assert r.returncode == 0, r.stderr
    assert "tok/step, acceptance" in r.stderr
    bad = _cli(["run", "--model", tiny_qwen3, "--raw", "--draft", "medusa", "x"], echo_env)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("Error: Unknown drafter 'medusa'")


class OutOfVocabulary(Drafter):
    name = "oov"

    def propose(self, context):
        return [context.token_ids[-1], 10**6, 3]


def test_a_drafted_token_outside_the_vocabulary_ends_the_chain(tiny_qwen3):
    llm = LLM(tiny_qwen3, progress=False, max_context=64)
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    plain = llm.generate([7, 8, 9], params)
    llm.drafter = OutOfVocabulary()
    out = llm.generate([7, 8, 9], params)
    assert out.token_ids == plain.token_ids
    assert 0 < out.stats["drafted_tokens"] <= out.stats["verify_steps"]  # only the first token of each chain
