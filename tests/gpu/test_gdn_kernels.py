"""The Gated DeltaNet decode/verify and prefill kernels against the reference ops (ninfer.reference.gdn, .ops), on
fresh random inputs of the Qwen3.5-27B shapes (16 key heads, 48 value heads, Dk = Dv = 128, conv width
4 over the 10240 q|k|v channels), laid out as the layer passes them (strided views of the projection
outputs). Each op runs in float32 and in every dtype the backend serves (the launchers dispatch on
the tensors' dtype). Outputs are poisoned (NaN) before each run and must hold no NaN. Tolerance:
relative L2 < 1e-5 for float32 outputs (states always; o and y for float32 inputs), < 1e-2 for
bf16/fp16 outputs, and conv windows exactly (they are copies of inputs). The launchers' reference
fallback is disabled while a kernel is under test, so a shape the kernel refuses fails loudly; the chunked
prefill tests also check which kernels ran (the chunked pair, not the token-by-token kernel)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpu_testing import backend_dtypes, poison_allocator, rel_l2
from ninfer.backends import installed_backends
from ninfer.ops import DeviceSpec, resolve
from ninfer.reference import gdn as ref
from ninfer.reference import ops as ref_ops

HK, H, D, K = 16, 48, 128, 4  # Qwen3.5-27B linear attention
QK, VW = HK * D, H * D
C = 2 * QK + VW  # 10240 conv channels: q | k | v
GDN_OPS = ("causal_conv1d_update", "causal_conv1d_prefill", "gdn_recurrent", "gdn_recurrent_states", "gdn_chunked",
           "rms_norm_gated", "gdn_recurrent_gated", "gdn_in_proj")


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


@pytest.fixture
def launched(backend, monkeypatch):
    """The names of the kernels the backend's launchers launch (in order)."""
    from ninfer.backends import installed_backends

    lib = installed_backends()[backend].kernels
    real, names = lib.module, []

    class Recording:
        def __init__(self, mod):
            self.mod = mod

        def __getitem__(self, name):
            names.append(name)
            return self.mod[name]

    monkeypatch.setattr(lib, "module", lambda device=None: Recording(real(device)))
    return names


def check_gdn(ops, T, dtype, op: str, fresh: bool = False, state_tol: float = 1e-5, f32_tol: float = 1e-5):
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
    assert err_o < (f32_tol if dtype == torch.float32 else tol(dtype)), f"{what}: o relative L2 error {err_o:.2e}"
    assert err_s < state_tol, f"{what}: state relative L2 error {err_s:.2e}"
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


def chunked_kernels(dtype, bv=16, simt=False):
    """The chunked pair the launcher should pick: the tensor-core state pass for 16-bit inputs on sm_80+, the
    CUDA-core one (value slices of bv) for float32 inputs, older GPUs or NINFER_GDN_CHUNK_STATE=simt."""
    from ninfer.kernels.library import DTYPE_SUFFIX

    s = DTYPE_SUFFIX.get(dtype, "f32")
    if s != "f32" and not simt and torch.cuda.get_device_capability() >= (8, 0):
        return [f"gdn_chunk_prep_{s}_d128", f"gdn_chunk_state_mma_{s}_d128"]
    return [f"gdn_chunk_prep_{s}_d128", f"gdn_chunk_state_{s}_d128_v{bv}"]


@pytest.mark.parametrize("T,fresh", [(1, False), (7, False), (63, True), (64, False), (65, False), (300, False),
                                     (1000, True), (2048, False)])
def test_gdn_chunked_prefill(backend, kernels_only, launched, T, fresh):
    """Prefill's op (the chunked kernels) against the reference's chunked form: T below, at and past one
    64-token chunk, with and without an initial state, 16 key heads serving 48 value heads."""
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        launched.clear()
        long = T > 300  # fp32 round-off of two summation orders grows with the prompt
        check_gdn(ops, T, dtype, "gdn_chunked", fresh=fresh, state_tol=1e-4 if long else 1e-5,
                  f32_tol=1e-4 if long else 1e-5)
        assert launched == chunked_kernels(dtype), f"{dtype} T={T}: launched {launched}"


@pytest.mark.parametrize("bv", [16, 32])
def test_gdn_chunked_slice_widths(backend, kernels_only, launched, monkeypatch, bv):
    """Both value-slice widths of the CUDA-core state pass (NINFER_GDN_CHUNK_STATE=simt, NINFER_GDN_CHUNK_BV), in
    the model dtype, a long prompt included."""
    monkeypatch.setenv("NINFER_GDN_CHUNK_STATE", "simt")
    monkeypatch.setenv("NINFER_GDN_CHUNK_BV", str(bv))
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    for T in (200, 2048):
        launched.clear()
        check_gdn(ops, T, dtype, "gdn_chunked", state_tol=1e-4 if T > 300 else 1e-5)
        assert launched == chunked_kernels(dtype, bv, simt=True)


def test_gdn_chunked_ungrouped_heads(backend, kernels_only, launched):
    """As many key heads as value heads (H / Hk = 1), T not a multiple of 64."""
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    T, Hv = 150, 8
    y = randn(T, 3 * Hv * D + 8, dtype=dtype)  # q | k | v | spare columns: strided views
    q, k, v = (y[:, i * Hv * D:(i + 1) * Hv * D].reshape(T, Hv, D) for i in range(3))
    g = -torch.rand(T, Hv, device="cuda") * 2
    beta = torch.rand(T, Hv, device="cuda").to(dtype)
    s0 = randn(Hv, D, D, scale=0.5)
    poison_allocator()
    o, s = ops.gdn_chunked(q, k, v, g, beta, s0)
    want_o, want_s = ref.gdn_chunked(*upcast(q, k, v), g, beta.float(), s0)
    assert launched == chunked_kernels(dtype)
    assert rel_l2(o, want_o) < tol(dtype) and rel_l2(s, want_s) < 1e-5


def test_gdn_chunked_prefill_in_pieces(backend, kernels_only):
    """A prompt in 2048-token pieces (as the runner prefills) carries the state from piece to piece: equal
    to the reference over the whole prompt."""
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    q, k, v, g, beta = layer_inputs(2 * 2048 + 100, dtype)
    s, outs = None, []
    for a in range(0, q.shape[0], 2048):
        o, s = ops.gdn_chunked(q[a:a + 2048], k[a:a + 2048], v[a:a + 2048], g[a:a + 2048], beta[a:a + 2048], s)
        outs.append(o)
    want_o, want_s = ref.gdn_chunked(*upcast(q, k, v), g, beta.float(), None)
    assert rel_l2(torch.cat(outs), want_o) < tol(dtype) and rel_l2(s, want_s) < 1e-4


@pytest.mark.parametrize("T,bias", [(1, False), (2, True), (64, False), (65, True), (2048, False)])
def test_causal_conv1d_prefill(backend, kernels_only, T, bias):
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        mixed = randn(T, C + VW, dtype=dtype)  # [T, C + H*Dv]: the in_proj output, z after q|k|v
        x = mixed[:, :C]
        w = randn(C, K, dtype=dtype, scale=0.5)
        b = randn(C, dtype=dtype) if bias else None
        window = randn(C, K - 1, dtype=dtype).float()  # [C, K-1] earlier inputs (copies of model-dtype inputs)
        before = window.clone()
        poison_allocator()
        y, new_window = ops.causal_conv1d_prefill(x, w, b, window)
        want_y, want_window = ref.causal_conv1d_prefill(x.float(), w.float(), None if b is None else b.float(),
                                                        window)
        assert y.shape == (T, C) and y.dtype == dtype and new_window.dtype == torch.float32
        err = rel_l2(y, want_y)
        assert err < tol(dtype), f"{dtype} T={T}: y relative L2 error {err:.2e}"
        assert torch.equal(new_window, want_window), f"{dtype} T={T}: the new conv window differs"
        assert torch.equal(window, before), "the op modified its input conv window"


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


@pytest.mark.parametrize("op,T", [("gdn_recurrent", 1), ("gdn_recurrent", 3), ("gdn_recurrent_states", 4)])
def test_in_place_state_update(backend, kernels_only, op, T):
    """out_state = the input state (the decode/verify path): the kernel updates it in place and the
    result equals the reference's fresh one; for verify the per-position states come back as well."""
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        q, k, v, g, beta = layer_inputs(T, dtype)
        s0 = randn(H, D, D, scale=0.5)  # [H, Dk, Dv] fp32
        want_o, want_s = getattr(ref, op)(*upcast(q, k, v), g, beta.float(), s0.clone())
        want_final = want_s[-1] if op == "gdn_recurrent_states" else want_s
        poison_allocator()
        o, s = getattr(ops, op)(q, k, v, g, beta, s0, out_state=s0)
        assert rel_l2(o, want_o) < tol(dtype)
        assert rel_l2(s0, want_final) < 1e-5, f"{op} {dtype}: the state updated in place differs"
        if op == "gdn_recurrent":
            assert s is s0
        else:
            assert rel_l2(s, want_s) < 1e-5


def test_conv_window_update_in_place(backend, kernels_only):
    ops = gdn_ops(backend)
    for dtype in backend_dtypes(backend):
        x = randn(2, C, dtype=dtype)
        w = randn(C, K, dtype=dtype, scale=0.5)
        window = randn(C, K - 1)
        want_y, want_window = ref.causal_conv1d_update(x.float(), w.float(), None, window.clone())
        y, got = ops.causal_conv1d_update(x, w, None, window, out_state=window)
        assert got is window and torch.equal(window, want_window)
        assert rel_l2(y, want_y) < tol(dtype)


def sfx(dtype) -> str:
    from ninfer.kernels.library import DTYPE_SUFFIX

    return DTYPE_SUFFIX.get(dtype, "f32")


def gated_inputs(T: int, dtype: torch.dtype):
    """z as the layer passes it (a strided view of the projection output) and the norm's weight."""
    z = randn(T, C + VW, dtype=dtype)[:, C:].reshape(T, H, D)  # [T, H, Dv], row stride C + VW
    w = (randn(D, scale=0.3) + 1).to(dtype)
    return z, w


@pytest.mark.parametrize("T,keep_all", [(1, False), (3, False), (1, True), (5, True), (16, True), (19, True)])
def test_gdn_recurrent_gated(backend, kernels_only, launched, T, keep_all):
    """The recurrence + gated output norm in one kernel (decode and verify), the state updated in place."""
    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        q, k, v, g, beta = layer_inputs(T, dtype)
        z, w = gated_inputs(T, dtype)
        s0 = randn(H, D, D, scale=0.5)  # [H, Dk, Dv] fp32
        want_o, want_s = ref.gdn_recurrent_gated(*upcast(q, k, v), g, beta.float(), s0.clone(), z.float(), w.float(),
                                                 1e-6, keep_all=keep_all)
        want_final = want_s[-1] if keep_all else want_s
        poison_allocator()
        launched.clear()
        o, s = ops.gdn_recurrent_gated(q, k, v, g, beta, s0, z, w, 1e-6, out_state=s0, keep_all=keep_all)
        assert launched == [f"gdn_recurrent_gated_{sfx(dtype)}_d128"], launched
        what = f"{dtype} T={T} keep_all={keep_all}"
        assert o.shape == (T, H, D) and o.dtype == dtype and not torch.isnan(o).any()
        err = rel_l2(o, want_o)
        assert err < tol(dtype), f"{what}: o relative L2 error {err:.2e}"
        assert rel_l2(s0, want_final) < 1e-5, f"{what}: the state updated in place differs"
        if keep_all:
            assert s.shape == (T, H, D, D) and rel_l2(s, want_s) < 1e-5, f"{what}: per-position states differ"
        else:
            assert s is s0


def test_gdn_recurrent_gated_writes_the_fixed_point_form(backend, kernels_only):
    """fixed=True on one token: o and the state bit for bit those of the plain call, and o's fixed-point form for the
    quantised out_proj (a head's 128 values one group) attached, bit for bit ninfer.quant.fixed's of the stored o,
    whose groups hold outliers and a zero head; verify calls (keep_all) and several tokens attach nothing."""
    from ninfer.quant import fixed

    ops = gdn_ops(backend)
    for dtype in dtypes(backend):
        q, k, v, g, beta = layer_inputs(1, dtype)
        z, w = gated_inputs(1, dtype)
        z[0, 5] = 0  # head 5's output all zeros: sx = 1
        w[::37] = 9  # an outlier column in every head
        s0 = randn(H, D, D, scale=0.5)
        s1 = s0.clone()
        o0, _ = ops.gdn_recurrent_gated(q, k, v, g, beta, s0, z, w, 1e-6, out_state=s0)
        poison_allocator()
        o, _ = ops.gdn_recurrent_gated(q, k, v, g, beta, s1, z, w, 1e-6, out_state=s1, fixed=True)
        assert torch.equal(o, o0) and torch.equal(s1, s0) and fixed.attached(o0) is None
        got = fixed.attached(o)
        assert got is not None, dtype
        xq, xg = fixed.fixed_point(o.flatten())
        assert torch.equal(got[0], xq) and torch.equal(got[1], xg), dtype
        assert xg[5, 0].view(torch.float32) == 1 and xg[5, 1] == 0
        flat = fixed.carried(o, o.reshape(1, VW))
        assert fixed.attached(flat) is not None and fixed.attached(o.reshape(1, VW)) is None
        o2, _ = ops.gdn_recurrent_gated(q, k, v, g, beta, s1.clone(), z, w, 1e-6, keep_all=True, fixed=True)
        assert fixed.attached(o2) is None
        q, k, v, g, beta = layer_inputs(3, dtype)
        z, w = gated_inputs(3, dtype)
        o3, _ = ops.gdn_recurrent_gated(q, k, v, g, beta, s1.clone(), z, w, 1e-6, fixed=True)
        assert fixed.attached(o3) is None


def test_gdn_recurrent_gated_verify_is_decode_bitwise(backend, kernels_only):
    """A T-token verify call computes, token for token, the bits of T one-token decode calls (o and states):
    speculative decoding keeps exactly what plain decoding would have."""
    ops = gdn_ops(backend)
    for dtype in backend_dtypes(backend):
        T = 7
        q, k, v, g, beta = layer_inputs(T, dtype)
        z, w = gated_inputs(T, dtype)
        s0 = randn(H, D, D, scale=0.5)
        o_all, states = ops.gdn_recurrent_gated(q, k, v, g, beta, s0.clone(), z, w, 1e-6, keep_all=True)
        s = s0.clone()
        for t in range(T):
            one = slice(t, t + 1)
            o, s = ops.gdn_recurrent_gated(q[one], k[one], v[one], g[one], beta[one], s, z[one], w, 1e-6, out_state=s)
            assert torch.equal(o[0], o_all[t]), f"{dtype}: token {t}'s output differs between verify and decode"
            assert torch.equal(s, states[t]), f"{dtype}: the state after token {t} differs"


@pytest.mark.parametrize("pairs", ["", "0", "1"])  # the backend's choice; one row a warp; two (gemv.form)
@pytest.mark.parametrize("hidden,splitk", [(5120, "1"), (6144, "1"), (8704, "1"),  # split K 4, 2, 4 by the rule
                                           (5120, "0")])  # unsplit (NINFER_GEMV_SPLITK=0; ninfer.kernels.gemv.split_k)
def test_gdn_in_proj(backend, kernels_only, launched, hidden, splitk, pairs, monkeypatch):
    """The decode projection GEMV with the conv update and the gates in its epilogue: bit for bit what the
    unfused kernels give (the same GEMV, conv and gate kernels, launch for launch), and the reference's result."""
    from ninfer.kernels.gemv import form

    monkeypatch.setenv("NINFER_GEMV_SPLITK", splitk)
    if pairs:
        monkeypatch.setenv("NINFER_GEMV_PAIRS", pairs)
    else:
        monkeypatch.delenv("NINFER_GEMV_PAIRS", raising=False)
    tuned = installed_backends()[backend].kernels.tuning("NINFER_GEMV_PAIRS", 0) == 1
    ops = gdn_ops(backend)
    N = C + VW + 2 * H
    for dtype in backend_dtypes(backend):
        x = randn(1, hidden, dtype=dtype)
        W = randn(N, hidden, dtype=dtype, scale=hidden ** -0.5)  # rows [q|k|v | z | b | a]
        cw = randn(C, K, dtype=dtype, scale=0.5)
        window = randn(C, K - 1)
        A_log = torch.empty(H, device="cuda").uniform_(0, 16).log()
        dt_bias = randn(H)
        # the unfused kernels
        w2 = window.clone()
        mixed, z_want, b, a = ops.linear(x, W).split([C, VW, H, H], dim=-1)
        y_want, _ = ops.causal_conv1d_update(mixed, cw, None, w2, out_state=w2)
        g_want, beta_want = ops.gdn_gates(a, b, A_log, dt_bias)
        # the reference
        w3 = window.clone()
        ref_y, ref_z, ref_g, ref_beta = ref.gdn_in_proj(x.float(), W.float(), cw.float(), w3, A_log, dt_bias, C, VW)
        poison_allocator()
        launched.clear()
        y, z, g, beta = ops.gdn_in_proj(x, W, cw, window, A_log, dt_bias, C, VW)
        rows_w, sk = form(N, hidden, tuned)
        assert rows_w == (2 if pairs == "1" or (not pairs and tuned) else 1)
        assert launched == [f"gemv_gdn_in_{sfx(dtype)}_t1" + ("_r2" if rows_w == 2 else "")
                            + (f"_k{sk}" if sk > 1 or rows_w == 2 else "")], launched
        what = f"{dtype} hidden={hidden}"
        for name, got, want in (("conv output", y, y_want), ("z", z, z_want), ("g", g, g_want),
                                ("beta", beta, beta_want), ("conv window", window, w2)):
            assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {name} {got.shape} {got.dtype}"
            assert torch.equal(got, want), f"{what}: {name} differs from the unfused kernels'"
        for name, got, want in (("conv output", y, ref_y), ("z", z, ref_z), ("g", g, ref_g), ("beta", beta, ref_beta),
                                ("conv window", window, w3)):
            err = rel_l2(got, want)
            assert err < tol(dtype), f"{what}: {name} relative L2 error {err:.2e} against the reference"


def test_fused_decode_step_replays_in_a_cuda_graph(backend, kernels_only):
    """gdn_in_proj -> gdn_recurrent_gated (the decode path of a layer with dense weights) captured once, replayed
    on new inputs and state: equal to eager, bit for bit."""
    ops = gdn_ops(backend)
    dtype = backend_dtypes(backend)[0]
    hidden = 2048
    x = randn(1, hidden, dtype=dtype)
    W = randn(C + VW + 2 * H, hidden, dtype=dtype, scale=hidden ** -0.5)
    cw = randn(C, K, dtype=dtype, scale=0.5)
    window, s0 = randn(C, K - 1), randn(H, D, D, scale=0.5)
    A_log, dt_bias = torch.rand(H, device="cuda").add(1).log(), randn(H)
    w = (randn(D, scale=0.3) + 1).to(dtype)

    def step():
        y, z, g, beta = ops.gdn_in_proj(x, W, cw, window, A_log, dt_bias, C, VW)
        q, k, v = y.split([QK, QK, VW], dim=-1)
        o, _ = ops.gdn_recurrent_gated(q.reshape(1, HK, D), k.reshape(1, HK, D), v.reshape(1, H, D), g, beta, s0,
                                       z.reshape(1, H, D), w, 1e-6, out_state=s0)
        return o

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    inputs = (x, window, s0)
    fresh = [randn(*t.shape, dtype=t.dtype, scale=0.5) for t in inputs]
    for t, f in zip(inputs, fresh):
        t.copy_(f)
    graph.replay()
    got = (captured.clone(), window.clone(), s0.clone())
    for t, f in zip(inputs, fresh):
        t.copy_(f)
    want = (step(), window, s0)
    torch.cuda.synchronize()
    for name, a, b in zip(("o", "conv window", "state"), got, want):
        assert torch.equal(a, b), f"graph replay differs from eager in the {name}"
