"""Gated DeltaNet decode/verify kernels against the reference ops (ninfer.reference.gdn), on the
Qwen3.5-27B shapes (conv channels 10240, 16 key heads, 48 value heads, head dim 128), with q/k/v as
strided views of the conv output as the layer passes them. Outputs in the model dtype: relative L2
< 1e-2; states (float32): < 1e-5."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.ops import DeviceSpec, resolve
from ninfer.reference import gdn as ref

TOL, TOL_F32 = 1e-2, 1e-5
HK, H, D = 16, 48, 128


def opset(backend, dtype):
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype))
    assert ops.impls["gdn_recurrent"].backend == backend
    return ops


@pytest.mark.parametrize("T", [1, 3, 16])
def test_causal_conv1d_update(backend, T):
    C, K = 2 * HK * D + H * D, 4
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        x = torch.randn(T, C + H * D, device="cuda").to(dtype)[:, :C]  # a strided view, as the layer splits it
        w = (torch.randn(C, K, device="cuda") * 0.5).to(dtype)
        state = torch.randn(C, K - 1, device="cuda")
        poison_allocator()
        y, new_state = ops.causal_conv1d_update(x, w, None, state)
        want_y, want_state = ref.causal_conv1d_update(x.float(), w.float(), None, state)
        assert rel_l2(y, want_y) < TOL and rel_l2(new_state, want_state) < TOL_F32


def gdn_inputs(T, dtype, with_state=True):
    y = torch.randn(T, 2 * HK * D + H * D, device="cuda").to(dtype)
    q, k, v = y.split([HK * D, HK * D, H * D], dim=-1)
    q, k, v = q.reshape(T, HK, D), k.reshape(T, HK, D), v.reshape(T, H, D)
    g = -torch.rand(H, device="cuda").exp() * F.softplus(torch.randn(T, H, device="cuda"))  # [T, H] <= 0
    beta = torch.sigmoid(torch.randn(T, H, device="cuda")).to(dtype)
    state = torch.randn(H, D, D, device="cuda") * 0.3 if with_state else None
    return q, k, v, g, beta, state


@pytest.mark.parametrize("T,with_state", [(1, True), (1, False), (2, True)])
def test_gdn_recurrent(backend, T, with_state):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        q, k, v, g, beta, state = gdn_inputs(T, dtype, with_state)
        poison_allocator()
        o, s = ops.gdn_recurrent(q, k, v, g, beta, state)
        want_o, want_s = ref.gdn_recurrent(q.float(), k.float(), v.float(), g, beta.float(), state)
        assert o.dtype == dtype and rel_l2(o, want_o) < TOL and rel_l2(s, want_s) < TOL_F32


@pytest.mark.parametrize("T", [1, 4, 16])
def test_gdn_recurrent_states(backend, T):
    for dtype in backend_dtypes(backend):
        ops = opset(backend, dtype)
        q, k, v, g, beta, state = gdn_inputs(T, dtype)
        poison_allocator()
        o, states = ops.gdn_recurrent_states(q, k, v, g, beta, state)
        want_o, want_states = ref.gdn_recurrent_states(q.float(), k.float(), v.float(), g, beta.float(), state)
        assert states.shape == (T, H, D, D)
        assert rel_l2(o, want_o) < TOL and rel_l2(states, want_states) < TOL_F32
