"""The per-step verify width choice (ninfer.engine.width): measured costs, learned acceptance, and the
width that maximises expected tokens per second; end to end it stays lossless and backs off a drafter
that is never right."""

from __future__ import annotations

import random

import pytest

from ninfer import LLM
from ninfer.drafting import build_drafter
from ninfer.engine.width import Acceptance, VerifyCost, WidthPolicy

H200_27B = {1: 4.70e-3, 4: 6.51e-3, 8: 14.44e-3, 16: 31.09e-3}  # bench/RESULTS.md, verify cost per width


def _costs(table: dict[int, float]) -> VerifyCost:
    c = VerifyCost()
    for w, s in table.items():
        c.record(w, 99.0)  # a width's first run (graph capture, compile) is not counted
        c.record(w, s)
    return c


def _accepting(rate: float, steps: int = 600, chain: int = 16) -> Acceptance:
    """Evidence of a drafter each of whose positions is accepted with probability ``rate`` (seeded)."""
    rng, a = random.Random(0), Acceptance()
    for _ in range(steps):
        n = 0
        while n < chain and rng.random() < rate:
            n += 1
        a.record(chain, n)
    return a


def test_cost_first_run_ignored_interpolated_and_extrapolated():
    c = VerifyCost()
    assert c.cost(1) is None
    c.record(1, 1.0)  # first run of width 1: capture, not counted
    assert c.cost(1) is None
    c.record(1, 0.010)
    assert c.cost(1) == pytest.approx(0.010)
    assert c.cost(5) == pytest.approx(0.010 * 1.2)  # one width measured: the prior slope (5 % a token)
    c.record(9, 0.1)
    c.record(9, 0.030)
    assert c.cost(5) == pytest.approx(0.020)  # between measured widths: linear
    assert c.cost(13) == pytest.approx(0.040)  # beyond: the last slope
    c.record(1, 0.020)
    assert 0.010 < c.cost(1) < 0.020  # a running mean, not the last sample


def test_expected_tokens_follow_the_conditional_rates():
    a = _accepting(0.5)
    assert a.rate(1) == pytest.approx(0.5, abs=0.03)
    assert a.expected_tokens(0) == 1.0
    assert a.expected_tokens(3) == pytest.approx(1 + 0.5 + 0.25 + 0.125, abs=0.05)
    assert Acceptance().rate(7) == pytest.approx(0.6)  # never seen: the prior


def test_bandwidth_bound_verify_and_a_good_drafter_take_the_whole_chain():
    flat = _costs({w: 4.7e-3 * (1 + 0.02 * (w - 1)) for w in (1, 4, 8, 16)})
    assert WidthPolicy(flat, _accepting(0.9), mode="adaptive").choose(15) == 15


def test_measured_h200_costs_pick_width_4_for_a_fair_drafter():
    # E(3) / c(4) = 2.95 / 6.51 beats every other chain length at 80 % acceptance on these costs
    assert WidthPolicy(_costs(H200_27B), _accepting(0.8), mode="adaptive").choose(15) == 3


def test_a_drafter_that_is_never_right_is_backed_off_then_retried():
    def seconds(width):
        return 1e-3 * (1 + 0.3 * (width - 1))

    p = WidthPolicy(_costs({w: seconds(w) for w in (1, 2, 4)}), Acceptance(), mode="adaptive")
    tried = []
    for _ in range(300):
        d = p.choose(8)
        p.record(d, 0, seconds(d + 1))
        tried.append(d)
    assert max(tried[:3]) > 0  # the prior expects some acceptance: it drafts at first
    late = tried[100:]
    # then it mostly verifies alone, but old evidence fades and a chain is tried again now and then
    assert 0 < sum(d > 0 for d in late) < 0.15 * len(late)
    assert max(late) == 1


def test_max_mode_and_draft_time():
    p = WidthPolicy(_costs(H200_27B), _accepting(0.8), mode="max")
    assert p.choose(15) == 15
    p = WidthPolicy(_costs({1: 1e-3, 16: 1e-3}), _accepting(0.95), mode="adaptive")
    assert p.choose(15) == 15
    p.record_draft(5, 5 * 2e-3)  # drafting costs twice a verify per token: fewer tokens pay
    assert p.choose(15) < 15


def test_adaptive_width_is_lossless_and_drafts_less_for_a_useless_drafter(monkeypatch, tmp_path):
    from test_spec_greedy import GREEDY, PROMPT, _make
    from test_spec_support import add_mtp

    path = str(tmp_path / "model")
    _make("qwen3", path)
    add_mtp(path, seed=4)
    llm = LLM(path, progress=False, max_context=256)
    plain = llm.generate(PROMPT, GREEDY)
    drafted = {}
    for mode in ("max", "adaptive"):
        monkeypatch.setenv("NINFER_VERIFY_WIDTH", mode)
        llm.drafter = build_drafter("mtp:3", llm)  # random MTP weights: (almost) never right
        out = llm.generate(PROMPT, GREEDY)
        assert out.token_ids == plain.token_ids, mode
        drafted[mode] = out.stats["drafted_tokens"]
    llm.drafter = None
    assert drafted["adaptive"] < drafted["max"]
    print(f"\nmtp:3 with random weights: drafted {drafted['max']} tokens (max), {drafted['adaptive']} (adaptive)")
