"""Sampling: seeded determinism, and each filter against its definition on a fixed distribution."""

from __future__ import annotations

import pytest
import torch

from ninfer import SamplingParams
from ninfer.engine.sampler import Sampler
from ninfer.errors import NinferError

LOGITS = torch.log(torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]))


def probs(**kw):
    return Sampler(SamplingParams(**kw), torch.device("cpu")).probs(LOGITS.clone())


def test_temperature_one_is_softmax():
    torch.testing.assert_close(probs(temperature=1.0), torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]))


def test_top_k_keeps_k_most_likely():
    p = probs(temperature=1.0, top_k=2)
    torch.testing.assert_close(p, torch.tensor([0.5, 0.2, 0, 0, 0]) / 0.7)


def test_top_p_keeps_smallest_prefix_reaching_p():
    p = probs(temperature=1.0, top_p=0.8)  # 0.5 + 0.2 = 0.7 < 0.8, so 0.15 is needed too
    torch.testing.assert_close(p, torch.tensor([0.5, 0.2, 0.15, 0, 0]) / 0.85)


def test_min_p_drops_below_fraction_of_max():
    p = probs(temperature=1.0, min_p=0.3)  # threshold 0.15
    torch.testing.assert_close(p, torch.tensor([0.5, 0.2, 0.15, 0, 0]) / 0.85)


def test_seeded_draws_repeat_and_follow_the_distribution():
    s1 = Sampler(SamplingParams(seed=7), torch.device("cpu"))
    s2 = Sampler(SamplingParams(seed=7), torch.device("cpu"))
    a = [s1(LOGITS, [], []) for _ in range(50)]
    b = [s2(LOGITS, [], []) for _ in range(50)]
    assert a == b
    s = Sampler(SamplingParams(seed=1), torch.device("cpu"))
    counts = torch.bincount(torch.tensor([s(LOGITS, [], []) for _ in range(4000)]), minlength=5).float() / 4000
    torch.testing.assert_close(counts, torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]), atol=0.03, rtol=0)


def test_penalties():
    s = Sampler(SamplingParams(repetition_penalty=2.0, presence_penalty=0.5, frequency_penalty=0.25),
                torch.device("cpu"))
    logits = torch.tensor([2.0, -2.0, 1.0, 0.0])
    out = s.penalise(logits.clone(), prompt_ids=[0], output_ids=[1, 1, 2])
    # token 0: prompt only -> repetition only (2 / 2); token 1: output twice -> -2 * 2 - 0.5 - 0.5;
    # token 2: output once -> 1 / 2 - 0.5 - 0.25; token 3 untouched
    torch.testing.assert_close(out, torch.tensor([1.0, -5.0, -0.25, 0.0]))


@pytest.mark.parametrize("kw,word", [(dict(temperature=-1), "temperature"), (dict(top_p=0), "top_p"),
                                     (dict(max_tokens=0), "max_tokens"), (dict(top_k=-2), "top_k"),
                                     (dict(min_p=2), "min_p")])
def test_bad_params_are_one_clear_error(kw, word):
    with pytest.raises(NinferError, match=word):
        SamplingParams(**kw)
