"""Lazy RMSNorm (reference.ops: linear_add_norm, linear_normed, linear_silu_mul_normed; models.decoder:
DecoderBlock.lazy): the norm between two decode GEMVs folded into them. Checked here against the eager norm on the
reference backend: the ops' arithmetic on random tensors, and the decode of the real SmolLM2 model and of a random
hybrid qwen3_5 model with the lazy path forced on (NINFER_LAZY_NORM=1) against it off: the same greedy tokens and
logits within float32 rounding. The kernels against these reference ops: tests/gpu/test_fused.py."""

from __future__ import annotations

import pytest
import torch

from ninfer import LLM, SamplingParams
from ninfer.reference import ops as ref

PROMPT = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]


@pytest.mark.parametrize("zc", [False, True])
@pytest.mark.parametrize("T", [1, 3])
def test_lazy_ops_equal_the_eager_norm(zc, T):
    g = torch.Generator().manual_seed(0)
    K, N, I = 96, 64, 40
    x = torch.randn(T, K, generator=g, dtype=torch.float32)
    W = torch.randn(N, K, generator=g, dtype=torch.float32) / K ** 0.5
    r = torch.randn(T, N, generator=g, dtype=torch.float32)
    nw = torch.randn(N, generator=g, dtype=torch.float32)
    W2 = torch.randn(2 * I, N, generator=g, dtype=torch.float32) / N ** 0.5
    b = torch.randn(2 * I, generator=g, dtype=torch.float32)
    h, lazy = ref.linear_add_norm(x, W, r, nw, 1e-6, zc)
    normed, h_eager = ref.add_rms_norm(ref.linear(x, W), r, nw, 1e-6, zc)
    torch.testing.assert_close(h, h_eager, rtol=0, atol=0)
    assert lazy.parts.shape == (T, 1) and lazy.g.shape == (T, N)
    torch.testing.assert_close(ref.linear_normed(lazy, W2, b), ref.linear(normed, W2, b), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ref.linear_silu_mul_normed(lazy, W2), ref.linear_silu_mul(normed, W2),
                               rtol=1e-5, atol=1e-6)
    # several partial sums a row (a kernel's per-block sums) mean the same norm
    split = ref.LazyNormed(lazy.g, torch.stack([lazy.parts[:, 0] * 0.25, lazy.parts[:, 0] * 0.75], -1), 1e-6)
    torch.testing.assert_close(ref.linear_normed(split, W2), ref.linear_normed(lazy, W2), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def llm():
    return LLM(progress=False)  # the embedded default model (reference backend on the CPU)


def _decode_logits(runner, prompt, steps):
    runner.reset()
    logits = [runner.prefill(prompt)]
    for _ in range(steps):
        logits.append(runner.decode(int(logits[-1].argmax())))
    return torch.stack([lg.float().reshape(-1) for lg in logits])


def test_lazy_norm_selection(llm, monkeypatch):
    model = llm.runner.model
    n = len(model.layers)
    monkeypatch.setenv("NINFER_LAZY_NORM", "auto")
    assert model.lazy_norms(1) == [False] * n  # the reference backend: off unless forced
    monkeypatch.setenv("NINFER_LAZY_NORM", "1")
    assert model.lazy_norms(1) == [True] * n
    assert model.lazy_norms(2) == [False] * n  # prefill and verify keep the eager norms
    monkeypatch.setenv("NINFER_LAZY_NORM", "0")
    assert model.lazy_norms(1) == [False] * n


def _count(model, monkeypatch, op) -> list:
    import dataclasses

    calls = []
    impl = model.ops.impls[op]

    def spy(*a, **kw):
        calls.append(1)
        return impl.fn(*a, **kw)

    monkeypatch.setitem(model.ops.impls, op, dataclasses.replace(impl, fn=spy))
    return calls


def test_smollm2_decodes_the_same_with_lazy_norms(llm, monkeypatch):
    prompt = llm._ids(llm.render_chat(PROMPT))
    calls = _count(llm.runner.model, monkeypatch, "linear_add_norm")
    runs = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("NINFER_LAZY_NORM", mode)
        runs[mode] = _decode_logits(llm.runner, prompt, 12)
        llm.runner.reset()
        runs[mode + "text"] = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=16)).token_ids
    assert runs["1text"] == runs["0text"]
    # the lazy runs only: two a block a decode step but the last block's (the final norm stays eager)
    assert len(calls) == (12 + 15) * (2 * len(llm.runner.model.layers) - 1)
    a, b = runs["1"], runs["0"]
    assert torch.equal(a[0], b[0])  # the prefill never runs lazy
    assert torch.linalg.norm(a - b) / torch.linalg.norm(b) < 1e-5
    assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_hybrid_model_lazy_norms_only_on_attention_blocks(tmp_path, monkeypatch):
    from test_qwen3_5 import make_checkpoint

    make_checkpoint(str(tmp_path / "m"), multimodal=False, seed=3)
    hybrid = LLM(str(tmp_path / "m"), progress=False, max_context=128)
    model = hybrid.runner.model
    monkeypatch.setenv("NINFER_LAZY_NORM", "1")
    types = [model.cfg.layer_types[i] for i in range(len(model.layers))]
    assert model.lazy_norms(1) == [t == "full_attention" for t in types] and any(model.lazy_norms(1))
    prompt = [5, 17, 42, 99, 123, 7, 5, 17, 42, 61, 250, 88]
    runs = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("NINFER_LAZY_NORM", mode)
        runs[mode] = _decode_logits(hybrid.runner, prompt, 8)
    a, b = runs["1"], runs["0"]
    assert torch.linalg.norm(a - b) / torch.linalg.norm(b) < 1e-5
    assert torch.equal(a.argmax(-1), b.argmax(-1))
