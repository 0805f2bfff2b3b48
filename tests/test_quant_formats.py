"""Quantised checkpoint formats repack bit-exactly into ninfer's grouped-int layout.

References: compressed-tensors' own compressor/decompressor, GPTQ's published dequantisation
formula (written out independently here), and the `gguf` package's dequantize.
"""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ninfer.quant.compressed_tensors import CompressedTensorsDir
from ninfer.quant.gguf_repack import gguf_quant_weight
from ninfer.quant.gptq import GPTQDir
from ninfer.quant.layout import QuantWeight, dequantize, linear, quantize_rtn


# -- compressed-tensors ------------------------------------------------------------------------
def _write_ct_checkpoint(tmp_path, bits, symmetric, group_size, actorder=False):
    """A tiny model quantised and compressed by compressed-tensors itself, saved as a HF directory."""
    from compressed_tensors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    from compressed_tensors.quantization.utils.helpers import calculate_qparams
    from torch import nn

    torch.manual_seed(bits * 10 + symmetric)
    m = nn.Module()
    m.model = nn.Module()
    m.model.layers = nn.ModuleList([nn.Module()])
    m.model.layers[0].q_proj = nn.Linear(128, 48, bias=False)
    m.model.layers[0].down_proj = nn.Linear(256, 64, bias=False)
    m.lm_head = nn.Linear(128, 40, bias=False)
    m = m.to(torch.bfloat16)
    weights = {"num_bits": bits, "type": "int", "symmetric": symmetric, "strategy": "group", "group_size": group_size}
    cfg = QuantizationConfig.model_validate({"config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
                                             "ignore": ["lm_head"], "format": "pack-quantized"})
    apply_quantization_config(m, cfg)
    for mod in m.modules():
        if hasattr(mod, "quantization_scheme"):
            args = mod.quantization_scheme.weights
            g = mod.weight.data.view(mod.weight.shape[0], -1, args.group_size)
            s, z = calculate_qparams(g.amin(-1), g.amax(-1), args)
            mod.weight_scale.data.copy_(s)
            if hasattr(mod, "weight_zero_point"):
                mod.weight_zero_point.data.copy_(z)
    comp = ModelCompressor.from_pretrained_model(m, "pack-quantized")
    comp.compress_model(m)
    sd = {k: v.contiguous() for k, v in m.state_dict().items()}
    save_file(sd, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    comp.update_config(str(tmp_path))
    return sd, cfg


def _ct_decompress(sd, module, scheme):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor

    parts = {k[len(module) + 1:]: v for k, v in sd.items() if k.startswith(module + ".")}
    return PackedQuantizationCompressor.decompress(parts, scheme)["weight"]


@pytest.mark.parametrize("bits,symmetric,group", [(4, True, 32), (4, False, 64), (8, True, 128), (8, False, 32)])
def test_compressed_tensors_bit_exact(tmp_path, bits, symmetric, group):
    sd, cfg = _write_ct_checkpoint(tmp_path, bits, symmetric, group)
    ck = CompressedTensorsDir.open(str(tmp_path))
    scheme = cfg.config_groups["group_0"]
    for module in ("model.layers.0.q_proj", "model.layers.0.down_proj"):
        q = ck.quant_weight(f"{module}.weight")
        assert (q.bits, q.group_size, q.zeros is None) == (bits, group, symmetric)
        ref = _ct_decompress(sd, module, scheme)
        assert torch.equal(dequantize(q, ref.dtype), ref)
        assert torch.equal(ck.get(f"{module}.weight"), ref)
        assert ck.tensor_shape(f"{module}.weight") == tuple(ref.shape)
    # the ignore list: lm_head stays dense and is read as stored
    assert ck.quant_weight("lm_head.weight") is None
    assert torch.equal(ck.get("lm_head.weight"), sd["lm_head.weight"])
    assert ck.scheme_for("lm_head") == {}
    assert "model.layers.0.q_proj.weight_packed" not in ck.tensor_names()


def test_compressed_tensors_other_formats_refused(tmp_path):
    from ninfer.errors import NinferError

    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {}}}))
    save_file({"x": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    assert CompressedTensorsDir.can_open(str(tmp_path))
    with pytest.raises(NinferError, match="pack-quantized"):
        CompressedTensorsDir.open(str(tmp_path))


# -- GPTQ --------------------------------------------------------------------------------------
def _pack_rows(q: np.ndarray, bits: int) -> np.ndarray:
    """AutoGPTQ qweight: q [K, N] -> int32 [K*bits/32, N], row k at bits (k % per) * bits of word k // per."""
    per = 32 // bits
    out = np.zeros((q.shape[0] // per, q.shape[1]), dtype=np.uint64)
    for j in range(per):
        out |= q[j::per].astype(np.uint64) << np.uint64(bits * j)
    return out.astype(np.uint32).view(np.int32)


def _pack_cols(z: np.ndarray, bits: int) -> np.ndarray:
    per = 32 // bits
    out = np.zeros((z.shape[0], z.shape[1] // per), dtype=np.uint64)
    for j in range(per):
        out |= z[:, j::per].astype(np.uint64) << np.uint64(bits * j)
    return out.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("bits,fmt,act_order", [(4, "gptq", False), (4, "gptq_v2", True), (8, "gptq", True)])
def test_gptq_matches_reference_formula(tmp_path, bits, fmt, act_order):
    rng = np.random.default_rng(bits)
    k, n, group = 256, 64, 64
    qmax = (1 << bits) - 1
    q = rng.integers(0, qmax + 1, size=(k, n))
    z_true = rng.integers(1, qmax + 1, size=(k // group, n))  # v1 cannot store a zero of 0
    stored = z_true - 1 if fmt == "gptq" else z_true
    scales = (rng.random((k // group, n)) * 0.02 + 0.001).astype(np.float16)
    g_idx = np.arange(k) // group
    if act_order:
        g_idx = g_idx[rng.permutation(k)]
    tensors = {"model.layers.0.mlp.down_proj.qweight": torch.from_numpy(_pack_rows(q, bits)),
               "model.layers.0.mlp.down_proj.qzeros": torch.from_numpy(_pack_cols(stored, bits)),
               "model.layers.0.mlp.down_proj.scales": torch.from_numpy(scales),
               "model.layers.0.mlp.down_proj.g_idx": torch.from_numpy(g_idx.astype(np.int32)),
               "model.norm.weight": torch.ones(8)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    qc = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": act_order, "sym": False,
          "checkpoint_format": fmt}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": qc}))
    assert GPTQDir.can_open(str(tmp_path)) and not CompressedTensorsDir.can_open(str(tmp_path))
    ck = GPTQDir.open(str(tmp_path))
    # the reference: W^T[k, n] = scales[g_idx[k], n] * (q[k, n] - z[g_idx[k], n]), in fp16
    ref = (torch.from_numpy(scales[g_idx]) * torch.from_numpy((q - z_true[g_idx]).astype(np.float16))).t()
    name = "model.layers.0.mlp.down_proj.weight"
    assert torch.equal(ck.get(name), ref)
    assert ck.tensor_shape(name) == (n, k)
    qw = ck.quant_weight(name)
    assert (qw.perm is not None) == act_order
    x = torch.randn(3, k)
    ref32 = (torch.from_numpy(scales[g_idx]).float() * torch.from_numpy(q - z_true[g_idx]).float()).t()
    torch.testing.assert_close(linear(x, qw), x @ ref32.t(), rtol=1e-5, atol=1e-5)
    assert set(ck.tensor_names()) == {name, "model.norm.weight"}


# -- GGUF ---------------------------------------------------------------------------------------
def _smollm2():
    from ninfer.llm import default_model_path
    from ninfer.weights.gguf import GGUFCheckpoint

    return GGUFCheckpoint(default_model_path())


def test_gguf_real_file_q4_1_and_q8_0_bit_exact():
    import gguf

    from ninfer.weights.gguf import unpermute_rows

    ck = _smollm2()
    reader = gguf.GGUFReader(ck.path)
    by_name = {t.name: t for t in reader.tensors}
    cases = [("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", None),
             ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight", None),
             ("blk.5.attn_q.weight", "model.layers.5.self_attn.q_proj.weight", ck.config["num_attention_heads"]),
             ("token_embd.weight", "model.embed_tokens.weight", None)]
    for gname, hf, heads in cases:
        t = by_name[gname]
        ref = torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())  # file row order
        if heads:
            ref = ref[unpermute_rows(ref.shape[0], heads)]
        q = gguf_quant_weight(ck, hf)
        assert q is not None and q.group_size == 32
        assert (q.bits, q.mins is not None) == ((4, True) if t.tensor_type.name == "Q4_1" else (8, False))
        assert torch.equal(dequantize(q), ref), gname


class _FakeGGUF:
    """A checkpoint holding one tensor's raw ggml blocks (the reader interface gguf_repack uses)."""

    def __init__(self, raw: np.ndarray, type_name: str, shape):
        from types import SimpleNamespace

        self._raw, self._info = torch.from_numpy(raw.copy()), SimpleNamespace(type_name=type_name, shape=shape)

    def tensor_info(self, name):
        return self._info

    def raw(self, name):
        return self._raw


def _random_blocks(rng, qtype, rows, cols):
    import gguf

    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, nbytes), dtype=np.uint8)
    halves = {gguf.GGMLQuantizationType.Q4_K: [0, 2], gguf.GGMLQuantizationType.Q6_K: [208]}[qtype]
    for off in halves:  # sane fp16 super-block scales (random bytes could be inf/nan)
        raw[..., off:off + 2] = (rng.random((rows, cols // block)) * 0.01).astype(np.float16)[..., None].view(np.uint8)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("qname", ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"])
def test_gguf_types_bit_exact_against_gguf_package(qname):
    import gguf

    qtype = gguf.GGMLQuantizationType[qname]
    rng = np.random.default_rng(7)
    rows, cols = 16, 512
    if qname in ("Q4_K", "Q6_K"):  # the gguf package cannot quantise K-quants: random valid blocks
        raw = _random_blocks(rng, qtype, rows, cols)
    else:
        raw = gguf.quants.quantize(rng.standard_normal((rows, cols)).astype(np.float32), qtype)
    ref = torch.from_numpy(gguf.quants.dequantize(raw, qtype).copy())
    q = gguf_quant_weight(_FakeGGUF(raw, qname, (rows, cols)), "w")
    assert torch.equal(dequantize(q), ref)


# -- the layout itself ---------------------------------------------------------------------------
@pytest.mark.parametrize("bits,symmetric", [(8, True), (4, True), (4, False)])
def test_rtn_roundtrip_and_reference_gemm(bits, symmetric):
    torch.manual_seed(0)
    w = torch.randn(64, 256)
    q = quantize_rtn(w, bits, 64, symmetric)
    deq = dequantize(q)
    step = q.scales.float().repeat_interleave(64, dim=1)
    # round to nearest: within half a step (plus the fp16 rounding of the scale, <= 128 * 2**-11 steps)
    assert ((deq - w).abs() <= step * 0.57).all()
    assert (deq - w).abs().mean() < (step * 0.3).mean()
    x = torch.randn(5, 256)
    torch.testing.assert_close(linear(x, q), x @ deq.t())
    assert isinstance(q, QuantWeight) and q.shape == (64, 256)


def test_swiglu_takes_the_gemms_one_launch_form_where_offered(monkeypatch):
    """The SwiGLU layer with a quantised gate_up: the GEMM's ``with_silu_mul`` (the GPU's one-launch form) where it
    serves, the GEMM then silu_mul where it returns None or is absent (the reference GEMM here)."""
    import dataclasses

    from ninfer.layers.mlp import SwiGLU
    from ninfer.ops import DeviceSpec, resolve
    from ninfer.reference import ops as ref

    torch.manual_seed(0)
    ops = resolve("reference", DeviceSpec.of(torch.device("cpu"), torch.float32))
    mlp = SwiGLU(ops, 64, 96)
    mlp.gate_up.weight = quantize_rtn(torch.randn(192, 64) * 0.1, 4, 32)
    mlp.down.weight = quantize_rtn(torch.randn(64, 96) * 0.1, 4, 32)
    x = torch.randn(1, 64)
    two = linear(ref.silu_mul(linear(x, mlp.gate_up.weight)), mlp.down.weight)
    assert torch.equal(mlp(x), two)  # the reference GEMM offers no one-launch form
    calls = []

    def gemm(x, w, b=None):
        return linear(x, w, b)

    def one_launch(x, w):
        calls.append(w)
        return None if len(calls) == 1 else torch.full((1, 96), 0.5)

    gemm.with_silu_mul = one_launch
    layout = mlp.gate_up.weight.layout
    monkeypatch.setitem(ops.gemm, layout, dataclasses.replace(ops.gemm[layout], fn=gemm))
    assert torch.equal(mlp(x), two)  # declined: the two ops
    assert torch.equal(mlp(x), linear(torch.full((1, 96), 0.5), mlp.down.weight))  # served: its output goes down
    assert calls == [mlp.gate_up.weight, mlp.gate_up.weight]
