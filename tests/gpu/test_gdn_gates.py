"""The Gated DeltaNet gate kernel (g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)) against the
reference op, on fresh random inputs shaped as in_proj_ba's output split in two (strided views), poisoned
outputs, each dtype the backend serves; inputs it was not written for go to the reference."""

from __future__ import annotations

import pytest
import torch

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.backends import installed_backends
from ninfer.kernels.ops import make_ops
from ninfer.reference import gdn as ref


@pytest.mark.parametrize("T", [1, 4, 16, 333])
def test_gdn_gates_match_the_reference(backend, T):
    ops = make_ops(installed_backends()[backend].kernels)
    H = 48
    A_log = torch.rand(H, device="cuda") * 3 - 1  # fp32, as the layer keeps them
    dt_bias = torch.randn(H, device="cuda")
    for dtype in backend_dtypes(backend):
        ba = (torch.randn(T, 2 * H, device="cuda") * 8).to(dtype)  # large values reach softplus' linear branch
        b, a = ba.split([H, H], dim=-1)  # [T, H] views, row stride 2H
        poison_allocator()
        g, beta = ops["gdn_gates"](a, b, A_log, dt_bias)
        want_g, want_beta = ref.gdn_gates(a, b, A_log, dt_bias)
        assert g.dtype == torch.float32 and beta.dtype == dtype and g.shape == (T, H) and beta.shape == (T, H)
        assert rel_l2(g, want_g) < 1e-5
        assert rel_l2(beta.float(), want_beta.float()) < 1e-2
        # the bf16/fp16 sigmoid rounds like torch's: at most one unit in the last place apart
        assert (beta.float() - want_beta.float()).abs().max() <= 2 * torch.finfo(dtype).eps


def test_gdn_gates_fall_back_for_other_inputs(backend):
    ops = make_ops(installed_backends()[backend].kernels)
    dtype = backend_dtypes(backend)[0]
    a, b = torch.randn(3, 8, device="cuda").to(dtype), torch.randn(3, 8, device="cuda").to(dtype)
    A_log16, dt16 = torch.rand(8, device="cuda").to(dtype), torch.randn(8, device="cuda").to(dtype)
    g, beta = ops["gdn_gates"](a, b, A_log16, dt16)  # parameters not fp32: the reference op
    want_g, want_beta = ref.gdn_gates(a, b, A_log16, dt16)
    assert torch.equal(g, want_g) and torch.equal(beta, want_beta)
