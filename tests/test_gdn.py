"""Gated DeltaNet reference ops: every form agrees with a naive per-token loop and with transformers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ninfer.reference import gdn

HK, H, DK, DV = 2, 6, 16, 12  # grouped like Qwen3.5 (value heads = 3 x key heads), small dims


def _inputs(T: int, seed: int = 0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(T, HK, DK, generator=gen)
    k = torch.randn(T, HK, DK, generator=gen)
    v = torch.randn(T, H, DV, generator=gen)
    # decays as the model makes them: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)
    g = -torch.rand(H, generator=gen).mul(2).exp() * F.softplus(torch.randn(T, H, generator=gen))
    beta = torch.randn(T, H, generator=gen).sigmoid()
    s0 = torch.randn(H, DK, DV, generator=gen) * 0.5
    return [x.to(dtype) for x in (q, k, v, g, beta)] + [s0]


@pytest.mark.parametrize("T", [1, 7, 64, 100, 130])
def test_chunked_and_recurrent_match_naive_loop(T):
    q, k, v, g, beta, s0 = _inputs(T)
    o_ref, s_ref = gdn.gdn_naive(q, k, v, g, beta, s0)
    for chunk in (64, 16):
        o, s = gdn.gdn_chunked(q, k, v, g, beta, s0, chunk_size=chunk)
        torch.testing.assert_close(o.double(), o_ref, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(s.double(), s_ref, atol=1e-4, rtol=1e-4)
    o, s = gdn.gdn_recurrent(q, k, v, g, beta, s0)
    torch.testing.assert_close(o.double(), o_ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(s.double(), s_ref, atol=1e-4, rtol=1e-4)
    assert s.dtype == torch.float32


def test_zero_initial_state_is_the_default():
    q, k, v, g, beta, _ = _inputs(9)
    o_none, s_none = gdn.gdn_chunked(q, k, v, g, beta, None)
    o_zero, s_zero = gdn.gdn_naive(q, k, v, g, beta, torch.zeros(H, DK, DV))
    torch.testing.assert_close(o_none.double(), o_zero, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s_none.double(), s_zero, atol=1e-5, rtol=1e-5)


def test_recurrent_states_hold_the_state_after_every_position():
    T = 5
    q, k, v, g, beta, s0 = _inputs(T, seed=3)
    o_all, states = gdn.gdn_recurrent_states(q, k, v, g, beta, s0)
    assert states.shape == (T, H, DK, DV)
    for n in range(1, T + 1):
        o_n, s_n = gdn.gdn_naive(q[:n], k[:n], v[:n], g[:n], beta[:n], s0)
        torch.testing.assert_close(states[n - 1].double(), s_n, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(o_all[:n].double(), o_n, atol=1e-5, rtol=1e-5)


def test_split_runs_continue_from_the_state():
    """prefill 70 tokens, then 3 decode steps, then a 4-token verify == one 77-token prefill."""
    q, k, v, g, beta, s0 = _inputs(77, seed=5)
    o_full, s_full = gdn.gdn_chunked(q, k, v, g, beta, s0)
    o1, s = gdn.gdn_chunked(q[:70], k[:70], v[:70], g[:70], beta[:70], s0)
    outs = [o1]
    for t in range(70, 73):
        o, s = gdn.gdn_recurrent(q[t:t + 1], k[t:t + 1], v[t:t + 1], g[t:t + 1], beta[t:t + 1], s)
        outs.append(o)
    o, states = gdn.gdn_recurrent_states(q[73:], k[73:], v[73:], g[73:], beta[73:], s)
    outs.append(o)
    torch.testing.assert_close(torch.cat(outs), o_full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(states[-1], s_full, atol=1e-5, rtol=1e-5)


def test_bf16_inputs_compute_in_fp32_and_return_bf16():
    q, k, v, g, beta, s0 = _inputs(20, seed=7, dtype=torch.bfloat16)
    o, s = gdn.gdn_chunked(q, k, v, g, beta, s0)
    assert o.dtype == torch.bfloat16 and s.dtype == torch.float32
    o_ref, s_ref = gdn.gdn_naive(q, k, v, g, beta, s0)
    torch.testing.assert_close(s.double(), s_ref, atol=1e-4, rtol=1e-4)


# ---- causal conv1d ---------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 3, 10])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_prefill_matches_step_by_step(T, with_bias):
    gen = torch.Generator().manual_seed(T)
    C, K = 10, 4
    x = torch.randn(T, C, generator=gen)
    w = torch.randn(C, K, generator=gen)
    b = torch.randn(C, generator=gen) if with_bias else None
    state = torch.randn(C, K - 1, generator=gen)
    y, new_state = gdn.causal_conv1d_prefill(x, w, b, state)
    ys, s = [], state
    for t in range(T):
        yt, s = gdn.causal_conv1d_update(x[t:t + 1], w, b, s)
        ys.append(yt)
    torch.testing.assert_close(y, torch.cat(ys), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(new_state, s)
    # the window is just the last K-1 inputs (with the old window in front for short runs)
    torch.testing.assert_close(new_state, torch.cat([state, x.t()], dim=1)[:, -(K - 1):])
    y2, s2 = gdn.causal_conv1d_update(x, w, b, state)  # a multi-token update (verify) is the same
    torch.testing.assert_close(y2, y, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(s2, new_state)


# ---- against transformers' own torch fallbacks -------------------------------------------------

def _hf():
    return pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")


@pytest.mark.parametrize("T", [7, 100])
def test_matches_transformers_chunk_and_recurrent(T):
    hf = _hf()
    q, k, v, g, beta, s0 = _inputs(T, seed=11)
    args = dict(g=g[None], beta=beta[None], initial_state=s0[None], output_final_state=True,
                use_qk_l2norm_in_kernel=True)
    o_hf, s_hf = hf.torch_chunk_gated_delta_rule(q[None], k[None], v[None], **args)
    o, s = gdn.gdn_chunked(q, k, v, g, beta, s0)
    torch.testing.assert_close(o, o_hf[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(s, s_hf[0], atol=1e-4, rtol=1e-4)
    o_hf, s_hf = hf.torch_recurrent_gated_delta_rule(q[None], k[None], v[None], **args)
    o, s = gdn.gdn_recurrent(q, k, v, g, beta, s0)
    torch.testing.assert_close(o, o_hf[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(s, s_hf[0], atol=1e-5, rtol=1e-5)


def test_conv_matches_transformers():
    hf = _hf()
    gen = torch.Generator().manual_seed(2)
    C, K, T = 8, 4, 9
    x = torch.randn(T, C, generator=gen)
    w = torch.randn(C, K, generator=gen)
    y_hf = hf.causal_conv1d_fn(x.t()[None], w, None, activation="silu")[0].t()
    y, state = gdn.causal_conv1d_prefill(x, w, None, torch.zeros(C, K - 1))
    torch.testing.assert_close(y, y_hf, atol=1e-6, rtol=1e-6)
    # transformers' decode step keeps a K-wide window and updates it in place
    hf_state = torch.cat([torch.zeros(C, 1), state], dim=1)
    x1 = torch.randn(1, C, generator=gen)
    y1_hf = hf.causal_conv1d_update(x1.t()[None], hf_state[None], w, None, "silu")[0].t()
    y1, _ = gdn.causal_conv1d_update(x1, w, None, state)
    torch.testing.assert_close(y1, y1_hf, atol=1e-6, rtol=1e-6)


def test_ops_are_registered_by_name():
    from ninfer.ops import DeviceSpec, resolve

    opset = resolve("reference", DeviceSpec.of("cpu", torch.float32))
    for name, fn in gdn.OPS.items():
        assert getattr(opset, name) is fn


def test_out_state_updates_in_place_and_equals_the_fresh_result():
    """The decode/verify path passes out_state = the layer's own state: the reference ops write it in
    place and return it, with the same values as without out_state."""
    q, k, v, g, beta, s0 = _inputs(5)
    o_fresh, s_fresh = gdn.gdn_recurrent(q, k, v, g, beta, s0)
    state = s0.clone()
    o, s = gdn.gdn_recurrent(q, k, v, g, beta, state, out_state=state)
    assert s is state and torch.equal(o, o_fresh) and torch.equal(state, s_fresh)
    state = s0.clone()
    o, states = gdn.gdn_recurrent_states(q, k, v, g, beta, state, out_state=state)
    assert torch.equal(state, states[-1]) and torch.equal(states[-1], s_fresh)
    window = torch.randn(12, 3)
    x, w = torch.randn(2, 12), torch.randn(12, 4)
    y_fresh, win_fresh = gdn.causal_conv1d_update(x, w, None, window)
    y, win = gdn.causal_conv1d_update(x, w, None, window, out_state=window)
    assert win is window and torch.equal(window, win_fresh) and torch.equal(y, y_fresh)
