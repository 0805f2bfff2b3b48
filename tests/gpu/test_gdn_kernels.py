"""The Gated DeltaNet decode/verify kernels against the reference ops (ninfer.reference.gdn, .ops), on
fresh random inputs of the Qwen3.5-27B shapes (16 key heads, 48 value heads, Dk = Dv = 128, conv width
4 over the 10240 q|k|v channels), laid out as the layer passes them (strided views of the projection
outputs). Each op runs in float32 and in every dtype the backend serves (the launchers dispatch on
the tensors' dtype). Outputs are poisoned (NaN) before each run and must hold no NaN. Tolerance:
relative L2 < 1e-5 for float32 outputs (states always; o and y for float32 inputs), < 1e-2 for
bf16/fp16 outputs, and conv windows exactly (they are copies of inputs). The launchers' reference
fallback is disabled while a kernel is under test, so a shape the kernel refuses fails loudly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.ops import DeviceSpec, resolve
from ninfer.reference import gdn as ref
from ninfer.reference import ops as ref_ops

HK, H, D, K = 16, 48, 128, 4  # Qwen3.5-27B linear attention
QK, VW = HK * D, H * D
C = 2 * QK + VW  # 10240 conv channels: q | k | v
GDN_OPS = ("causal_conv1d_update", "gdn_recurrent", "gdn_recurrent_states", "gdn_chunked", "rms_norm_gated")


def tol(dtype: torch.dtype) -> float:
    return 1e-5 if dtype == torch.float32 else 1e-2


class _NoFallback:
    """Stands in for the reference module inside the launchers: a fallback fails the test."""

    def __init__(self, what: str):
        self.what = what

    def __getattr__(self, op):
        raise AssertionError(f"the {op} launcher fell back to the reference op ({self.what}): "
                             "the kernel did not run on these inputs")


@pytest.fixture
def kernels_only(monkeypatch):
    import ninfer.kernels.gdn
    import ninfer.kernels.ops

    monkeypatch.setattr(ninfer.kernels.gdn, "ref", _NoFallback("ninfer.reference.gdn"))
    monkeypatch.setattr(ninfer.kernels.ops, "ref", _NoFallback("ninfer.reference.ops"))
    # the reference's einsums must be true fp32, not TF32, for the 1e-5 comparisons
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(precision)


def gdn_ops(backend: str):
    """The backend's op set (its launchers dispatch on the inputs' dtype, float32 included)."""
    ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), backend_dtypes(backend)[0]))
    for op in GDN_OPS:
        got = ops.impls[op].backend
        assert got == backend, f"{op} is served by {got!r}, not by backend {backend!r}: check its plugin.py"
    return ops


def dtypes(backend: str) -> list[torch.dtype]:
    return [torch.float32, *backend_dtypes(backend)]


def randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


def layer_inputs(T: int, dtype: torch.dtype):
    """q, k, v, g, beta as the Gated DeltaNet layer makes them: views of the conv output, beta in the
    model dtype, g in float32 from A_log and dt_bias."""
    y = randn(T, C, dtype=dtype)  # [T, C] conv output
    q, k, v = y.split([QK, QK, VW], dim=-1)
    q, k, v = q.reshape(T, HK, D), k.reshape(T, HK, D), v.reshape(T, H, D)
    b, a = randn(T, 2 * H, dtype=dtype).split([H, H], dim=-1)  # [T, H] each, strided
    A_log = torch.empty(H, device="cuda").uniform_(0, 16).log()
    dt_bias = randn(H)
    beta = torch.sigmoid(b)
    g = -A_log.exp() * F.softplus(a.float() + dt_bias)  # [T, H] fp32, <= 0
    return q, k, v, g, beta


def upcast(*ts):
    return [t.float() for t in ts]


@pytest.mark.parametrize("T,bias", [(1, False), (4, False), (16, False), (3, True)])
def test_causal_conv1d_update(backend, kernels_only, T, bias):
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        mixed = randn(T, C + VW, dtype=dtype)  # [T, C + H*Dv]: the in_proj output, z after q|k|v
        x = mixed[:, :C]
        w = randn(C, K, dtype=dtype, scale=0.5)
        b = randn(C, dtype=dtype) if bias else None
        window = randn(C, K - 1, dtype=dtype).float()  # [C, K-1] earlier inputs, kept in fp32
        before = window.clone()
        poison_allocator()
        y, new_window = ops.causal_conv1d_update(x, w, b, window)
        want_y, want_window = ref.causal_conv1d_update(x.float(), w.float(), None if b is None else b.float(),
                                                       window)
        assert y.shape == (T, C) and y.dtype == dtype and new_window.dtype == torch.float32
        err = rel_l2(y, want_y)
        assert err < tol(dtype), f"{dtype} T={T}: y relative L2 error {err:.2e}"
        assert torch.equal(new_window, want_window), f"{dtype} T={T}: the new conv window differs"
        assert torch.equal(window, before), "the op modified its input conv window"


def check_gdn(ops, T, dtype, op: str, fresh: bool = False):
    keep_all = op == "gdn_recurrent_states"
    q, k, v, g, beta = layer_inputs(T, dtype)
    s0 = None if fresh else randn(H, D, D, scale=0.5)  # [H, Dk, Dv] fp32
    before = None if fresh else s0.clone()
    poison_allocator()
    o, s = getattr(ops, op)(q, k, v, g, beta, s0)
    want = getattr(ref, op)(*upcast(q, k, v), g, beta.float(), s0)
    assert o.shape == (T, H, D) and o.dtype == dtype and s.dtype == torch.float32
    assert s.shape == ((T, H, D, D) if keep_all else (H, D, D))
    err_o, err_s = rel_l2(o, want[0]), rel_l2(s, want[1])
    what = f"{op} {dtype} T={T}"
    assert err_o < tol(dtype), f"{what}: o relative L2 error {err_o:.2e}"
    assert err_s < 1e-5, f"{what}: state relative L2 error {err_s:.2e}"
    if before is not None:
        assert torch.equal(s0, before), "the op modified its input state"


@pytest.mark.parametrize("T", [1, 2, 16, 40])
def test_gdn_recurrent(backend, kernels_only, T):
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        check_gdn(ops, T, dtype, "gdn_recurrent")


def test_gdn_recurrent_from_zero_state(backend, kernels_only):
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        check_gdn(ops, 3, dtype, "gdn_recurrent", fresh=True)


@pytest.mark.parametrize("T", [1, 5, 16])
def test_gdn_recurrent_states(backend, kernels_only, T):
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        check_gdn(ops, T, dtype, "gdn_recurrent_states")


@pytest.mark.parametrize("T", [7, 64, 300])
def test_gdn_chunked_prefill(backend, kernels_only, T):
    """Prefill's op, served by the token-by-token kernel, against the reference's chunked form."""
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        check_gdn(ops, T, dtype, "gdn_chunked")


@pytest.mark.parametrize("T", [1, 16])
def test_rms_norm_gated_gdn_layout(backend, kernels_only, T):
    """The output norm as the layer calls it: o [T, H, Dv] from the rule, z a view of in_proj's output."""
    ops = gdn_ops(backend)
    for dtype in backend_dtypes(backend):  # a float32 model runs on the reference backend
        o = randn(T, H, D, dtype=dtype)
        z = randn(T, C + VW, dtype=dtype)[:, C:].reshape(T, H, D)
        w = randn(D, dtype=dtype, scale=0.5) + 1
        poison_allocator()
        y = ops.rms_norm_gated(o, z, w, 1e-6)
        err = rel_l2(y, ref_ops.rms_norm_gated(o.float(), z.float(), w.float(), 1e-6))
        assert y.shape == (T, H, D) and err < tol(dtype), f"{dtype} T={T}: relative L2 error {err:.2e}"


def test_decode_step_replays_in_a_cuda_graph(backend, kernels_only):
    """conv update -> gated delta rule captured once, replayed on new inputs: equal to eager."""
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    mixed = randn(1, C + VW, dtype=dtype)  # static inputs the graph reads
    ba = randn(1, 2 * H, dtype=dtype)
    w = randn(C, K, dtype=dtype, scale=0.5)
    window, s0 = randn(C, K - 1), randn(H, D, D, scale=0.5)
    A_log, dt_bias = torch.rand(H, device="cuda").add(1).log(), randn(H)

    def step():
        y, new_window = ops.causal_conv1d_update(mixed[:, :C], w, None, window)
        q, k, v = y.split([QK, QK, VW], dim=-1)
        b, a = ba.split([H, H], dim=-1)
        g = -A_log.exp() * F.softplus(a.float() + dt_bias)
        o, s = ops.gdn_recurrent(q.reshape(1, HK, D), k.reshape(1, HK, D), v.reshape(1, H, D), g,
                                 torch.sigmoid(b), s0)
        return new_window, o, s

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (compiles and loads the module) off the capture
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for t, scale in ((mixed, 1.0), (ba, 1.0), (window, 1.0), (s0, 0.5)):
        t.copy_(randn(*t.shape, dtype=t.dtype, scale=scale))
    graph.replay()
    eager = step()
    torch.cuda.synchronize()
    for name, got, want in zip(("conv window", "o", "state"), captured, eager):
        assert torch.equal(got, want), f"graph replay differs from eager in the {name}"


def test_unsupported_shapes_fall_back_to_the_reference(backend):
    """Dk = 64 (no kernel built for it) still gives the reference's answer, through the fallback."""
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    q, k, v = randn(2, 4, 64, dtype=dtype), randn(2, 4, 64, dtype=dtype), randn(2, 8, 64, dtype=dtype)
    g, beta = -torch.rand(2, 8, device="cuda"), torch.rand(2, 8, device="cuda").to(dtype)
    o, s = ops.gdn_recurrent(q, k, v, g, beta, None)
    want_o, want_s = ref.gdn_recurrent(q, k, v, g, beta, None)
    assert torch.equal(o, want_o) and torch.equal(s, want_s)
