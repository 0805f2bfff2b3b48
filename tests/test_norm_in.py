"""RMSNorm inside the decode GEMVs (reference.ops: linear_norm_in, linear_silu_mul_norm_in, linear_residual;
models.decoder: DecoderBlock.norm_in): no norm kernel between the projections of a block. Checked here against the
eager norms on the reference backend: the ops' arithmetic on random tensors, and the decode of the real SmolLM2
model with the path forced on (NINFER_NORM_IN=1) against it off: the same greedy tokens and logits within float32
rounding; a hybrid model (Gated DeltaNet blocks) keeps its norms. The kernels against these reference ops:
tests/gpu/test_fused.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ninfer import LLM, SamplingParams
from ninfer.reference import ops as ref

PROMPT = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]


@pytest.mark.parametrize("zc", [False, True])
@pytest.mark.parametrize("T", [1, 3])
def test_norm_in_ops_equal_the_eager_norm(zc, T):
    g = torch.Generator().manual_seed(0)
    K, N, I = 96, 64, 40
    h = torch.randn(T, K, generator=g) * 3
    w = torch.randn(K, generator=g)
    W = torch.randn(2 * I, K, generator=g) / K ** 0.5
    b = torch.randn(2 * I, generator=g)
    x = ref.NormIn(h, w, 1e-6, zc)
    normed = ref.rms_norm(h, w, 1e-6, zc)
    torch.testing.assert_close(ref.linear_norm_in(x, W, b), ref.linear(normed, W, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ref.linear_silu_mul_norm_in(x, W), ref.linear_silu_mul(normed, W),
                               rtol=1e-5, atol=1e-5)
    Wo, r = torch.randn(N, K, generator=g), torch.randn(T, N, generator=g)
    assert torch.equal(ref.linear_residual(h, Wo, r), ref.add_rms_norm(ref.linear(h, Wo), r, torch.ones(N), 1e-6)[1])


@pytest.fixture(scope="module")
def llm():
    return LLM(progress=False)  # the embedded default model (reference backend on the CPU)


def _count(model, monkeypatch, op) -> list:
    calls = []
    impl = model.ops.impls[op]

    def spy(*a, **kw):
        calls.append(1)
        return impl.fn(*a, **kw)

    monkeypatch.setitem(model.ops.impls, op, dataclasses.replace(impl, fn=spy))
    return calls


def _decode_logits(runner, prompt, steps):
    runner.reset()
    logits = [runner.prefill(prompt)]
    for _ in range(steps):
        logits.append(runner.decode(int(logits[-1].argmax())))
    return torch.stack([lg.float().reshape(-1) for lg in logits])


def test_norm_in_selection(llm, monkeypatch):
    model = llm.runner.model
    monkeypatch.delenv("NINFER_NORM_IN", raising=False)
    assert not model.norms_in_gemvs(1)  # opt-in
    monkeypatch.setenv("NINFER_NORM_IN", "auto")
    assert not model.norms_in_gemvs(1)  # the reference backend: off unless forced
    monkeypatch.setenv("NINFER_NORM_IN", "1")
    assert model.norms_in_gemvs(1)
    assert not model.norms_in_gemvs(2)  # prefill and verify keep the norm kernels
    monkeypatch.setenv("NINFER_NORM_IN", "0")
    assert not model.norms_in_gemvs(1)


def test_smollm2_decodes_the_same_with_norms_in_gemvs(llm, monkeypatch):
    prompt = llm._ids(llm.render_chat(PROMPT))
    calls = _count(llm.runner.model, monkeypatch, "linear_residual")
    norms = _count(llm.runner.model, monkeypatch, "add_rms_norm")
    runs = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("NINFER_NORM_IN", mode)
        before = len(norms)
        runs[mode] = _decode_logits(llm.runner, prompt, 12)
        runs[mode + "norms"] = len(norms) - before
        llm.runner.reset()
        runs[mode + "text"] = llm.generate(prompt, SamplingParams(temperature=0.0, max_tokens=16)).token_ids
    assert runs["1text"] == runs["0text"]
    layers = len(llm.runner.model.layers)
    # with the path on: two residual GEMVs a block a decode step (12 + 15 steps), and no add_rms_norm in decode steps
    assert len(calls) == (12 + 15) * 2 * layers
    assert runs["1norms"] == 2 * layers and runs["0norms"] == 13 * 2 * layers  # the prefill's, / every step's
    a, b = runs["1"], runs["0"]
    assert torch.equal(a[0], b[0])  # the prefill never runs it
    assert torch.linalg.norm(a - b) / torch.linalg.norm(b) < 1e-5
    assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_hybrid_model_keeps_its_norm_kernels(tmp_path, monkeypatch):
    from test_qwen3_5 import make_checkpoint

    make_checkpoint(str(tmp_path / "m"), multimodal=False, seed=3)
    hybrid = LLM(str(tmp_path / "m"), progress=False, max_context=128)
    monkeypatch.setenv("NINFER_NORM_IN", "1")
    model = hybrid.runner.model
    assert any(b.norm_in_capable() for b in model.layers)  # its attention blocks could
    assert not model.norms_in_gemvs(1)  # but the Gated DeltaNet blocks cannot: the model keeps its norms
