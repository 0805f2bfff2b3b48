"""The GGUF reader against the `gguf` package (dequantisation, metadata) and transformers (names,
config, llama's Q/K un-permutation) on small written files and on the real SmolLM2 file."""

from __future__ import annotations

import os
import re
import shutil

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from ninfer.errors import NinferError
from ninfer.weights.gguf import GGUFCheckpoint, hf_tensor_name
from ninfer.weights.gguf_quants import dequantize, q4_1

QUANTIZABLE = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.BF16]  # gguf.quants.quantize supports these
# K-quants: random bytes with sane fp16 scales at these byte offsets in each block
K_QUANT_SCALES = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}


def _random_k_blocks(qtype, rows, cols, rng) -> np.ndarray:
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, block_bytes), dtype=np.uint8)
    for off in K_QUANT_SCALES[qtype]:
        scales = rng.uniform(-0.05, 0.05, size=(rows, cols // block)).astype(np.float16)
        raw[:, :, off:off + 2] = scales.view(np.uint8).reshape(rows, cols // block, 2)
    return raw.reshape(rows, -1)  # [rows, bytes per row]


def _write(path, arch, metadata, tensors, alignment=None):
    """tensors: name -> (array, raw ggml type or None)."""
    w = gguf.GGUFWriter(str(path), arch=arch)
    if alignment:
        w.add_custom_alignment(alignment)
    for key, (value, vtype, sub) in metadata.items():
        w.add_key_value(key, value, vtype, sub_type=sub)
    for name, (arr, qtype) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def every_type_file(tmp_path_factory):
    """One GGUF holding a tensor of every type ninfer dequantises, with an unusual alignment."""
    rng = np.random.default_rng(0)
    tensors = {}
    data = rng.standard_normal((6, 512)).astype(np.float32)
    tensors["t.F32"] = (data, None)
    tensors["t.F16"] = (data.astype(np.float16), None)
    for qtype in QUANTIZABLE:
        tensors[f"t.{qtype.name}"] = (gguf_quantize(data, qtype), qtype)
    for qtype in K_QUANT_SCALES:
        tensors[f"t.{qtype.name}"] = (_random_k_blocks(qtype, 3, 768, rng), qtype)
    tensors["t.Q8_0_3d"] = (gguf_quantize(rng.standard_normal((2, 3, 64)).astype(np.float32), Q.Q8_0), Q.Q8_0)
    path = tmp_path_factory.mktemp("gguf") / "types.gguf"
    _write(path, "llama", {}, tensors, alignment=64)
    return path


def test_every_dequantiser_is_bit_exact(every_type_file):
    ckpt = GGUFCheckpoint.open(str(every_type_file))
    reader = gguf.GGUFReader(str(every_type_file))
    assert len(reader.tensors) == 14
    for t in reader.tensors:
        ref = torch.from_numpy(np.array(gguf_dequantize(t.data, t.tensor_type), dtype=np.float32))
        ours = ckpt.get(t.name)
        assert ours.dtype == torch.float32
        assert tuple(ours.shape) == tuple(reversed([int(d) for d in t.shape])), t.name
        assert torch.equal(ours, ref.reshape(ours.shape)), t.name
        assert ckpt.tensor_type(t.name) == t.tensor_type.name
        assert ckpt.raw(t.name).numpy().tobytes() == t.data.tobytes()
        assert torch.equal(ckpt.get(t.name, device="cpu"), ours)  # the on-device path, here on the CPU


def test_metadata_of_every_value_type(tmp_path):
    V = gguf.GGUFValueType
    md = {
        "x.u8": (200, V.UINT8, None), "x.i8": (-100, V.INT8, None), "x.u16": (60000, V.UINT16, None),
        "x.i16": (-30000, V.INT16, None), "x.u32": (4_000_000_000, V.UINT32, None),
        "x.i32": (-2_000_000_000, V.INT32, None), "x.f32": (0.1, V.FLOAT32, None),
        "x.u64": (2**63 + 5, V.UINT64, None), "x.i64": (-(2**62), V.INT64, None), "x.f64": (0.1, V.FLOAT64, None),
        "x.bool": (True, V.BOOL, None), "x.str": ("héllo 世界", V.STRING, None),
        "x.strs": (["a", "ßb", ""], V.ARRAY, V.STRING), "x.i32s": ([1, -2, 3], V.ARRAY, V.INT32),
        "x.f32s": ([0.5, -1.25], V.ARRAY, V.FLOAT32), "x.bools": ([True, False], V.ARRAY, V.BOOL),
        "x.u8s": ([1, 255], V.ARRAY, V.UINT8),
    }
    path = tmp_path / "md.gguf"
    _write(path, "llama", md, {"w": (np.ones((2, 32), np.float32), None)})
    ours = GGUFCheckpoint.open(str(path)).metadata
    fields = gguf.GGUFReader(str(path)).fields
    for key in md:
        ref = fields[key].contents()
        if key == "x.f32":
            assert np.float32(ours[key]) == np.float32(ref) and ours[key] == 0.1  # shortest decimal kept
        else:
            assert ours[key] == ref, key
    assert ours["general.architecture"] == "llama"


def test_truncated_or_foreign_file_is_one_clear_error(smollm2_gguf, tmp_path):
    size = os.path.getsize(smollm2_gguf)
    with open(smollm2_gguf, "rb") as f:
        head = f.read(3_000_000)
    # cut inside the header, inside the token list, and inside the tensor data (the tail goes missing)
    for cut in (10, 200_000, 2_999_999):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(head[:cut])
        with pytest.raises(NinferError, match="truncated or not a GGUF file; download it again"):
            GGUFCheckpoint.open(str(bad))
    tail_cut = tmp_path / "tail.gguf"
    with open(smollm2_gguf, "rb") as src, open(tail_cut, "wb") as dst:
        shutil.copyfileobj(src, dst)
        dst.truncate(size - 1000)
    with pytest.raises(NinferError, match="truncated"):
        GGUFCheckpoint.open(str(tail_cut))
    v1 = tmp_path / "v1.gguf"
    v1.write_bytes(head[:4] + (1).to_bytes(4, "little") + head[8:])
    with pytest.raises(NinferError, match="GGUF version 1 file.*convert the model again"):
        GGUFCheckpoint.open(str(v1))
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    assert not GGUFCheckpoint.can_open(str(text)) and not GGUFCheckpoint.can_open(str(tmp_path))
    assert GGUFCheckpoint.can_open(smollm2_gguf)


def test_qwen3_config_names_and_no_permutation(tmp_path):
    V = gguf.GGUFValueType
    rng = np.random.default_rng(1)
    hidden, heads, kv, head_dim, layers = 64, 4, 2, 32, 2
    md = {
        "qwen3.embedding_length": (hidden, V.UINT32, None), "qwen3.block_count": (layers, V.UINT32, None),
        "qwen3.feed_forward_length": (96, V.UINT32, None), "qwen3.attention.head_count": (heads, V.UINT32, None),
        "qwen3.attention.head_count_kv": (kv, V.UINT32, None), "qwen3.attention.key_length": (head_dim, V.UINT32, None),
        "qwen3.attention.layer_norm_rms_epsilon": (1e-6, V.FLOAT32, None),
        "qwen3.rope.freq_base": (1_000_000.0, V.FLOAT32, None), "qwen3.context_length": (4096, V.UINT32, None),
        "tokenizer.ggml.tokens": ([f"t{i}" for i in range(50)], V.ARRAY, V.STRING),
        "tokenizer.ggml.bos_token_id": (3, V.UINT32, None), "tokenizer.ggml.eos_token_id": (7, V.UINT32, None),
    }
    q = rng.standard_normal((heads * head_dim, hidden)).astype(np.float32)
    k = rng.standard_normal((kv * head_dim, hidden)).astype(np.float32)
    # the embedding is padded past the 50 listed tokens, as converters do for Qwen
    tensors = {"token_embd.weight": (rng.standard_normal((64, hidden)).astype(np.float32), None),
               "blk.0.attn_q.weight": (q, None), "blk.0.attn_k.weight": (k, None),
               "blk.0.attn_q_norm.weight": (np.ones(head_dim, np.float32), None),
               "output.weight": (rng.standard_normal((64, hidden)).astype(np.float32), None)}
    path = tmp_path / "qwen3.gguf"
    _write(path, "qwen3", md, tensors)
    ckpt = GGUFCheckpoint.open(str(path))
    c = ckpt.config
    assert c["architectures"] == ["Qwen3ForCausalLM"] and c["model_type"] == "qwen3"
    assert (c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]) == (hidden, layers, 96)
    assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (heads, kv, head_dim)
    assert (c["rms_norm_eps"], c["rope_theta"], c["max_position_embeddings"]) == (1e-6, 1e6, 4096)
    assert c["vocab_size"] == 64 and c["tie_word_embeddings"] is False
    assert (c["bos_token_id"], c["eos_token_id"]) == (3, 7)
    assert set(ckpt.tensor_names()) == {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                                        "model.layers.0.self_attn.k_proj.weight", "lm_head.weight",
                                        "model.layers.0.self_attn.q_norm.weight"}
    # only llama files are permuted: qwen rows come back as written
    assert torch.equal(ckpt.get("model.layers.0.self_attn.q_proj.weight"), torch.from_numpy(q))
    assert torch.equal(ckpt.get("model.layers.0.self_attn.k_proj.weight"), torch.from_numpy(k))


@pytest.mark.parametrize("arch,fix", [("mamba", "load the model's Hugging Face checkpoint folder"),
                                      ("qwen35", "for Qwen3.5 / 3.6 (hybrid Gated DeltaNet) load the Hugging Face"),
                                      ("qwen3moe", "mixture-of-experts models are not supported")])
def test_an_architecture_not_read_from_gguf_is_named_with_what_to_load_instead(tmp_path, arch, fix):
    """Before session 21 the message listed Qwen3_5ForCausalLM among the supported architectures for a qwen35 GGUF,
    which ninfer cannot read."""
    path = tmp_path / f"{arch}.gguf"
    _write(path, arch, {}, {"w": (np.ones((2, 32), np.float32), None)})
    with pytest.raises(NinferError, match=rf"architecture '{arch}', which ninfer does not read from GGUF "
                                          rf"\(llama, qwen2, qwen3\); {re.escape(fix)}") as e:
        GGUFCheckpoint.open(str(path))
    assert "Qwen3_5ForCausalLM" not in str(e.value)


def test_split_gguf_opens_from_any_part(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {f"blk.{i}.ffn_up.weight": rng.standard_normal((4, 32)).astype(np.float32) for i in range(5)}
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), arch="qwen2", split_max_tensors=2)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    parts = sorted(p.name for p in tmp_path.iterdir())
    assert parts == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    ckpt = GGUFCheckpoint.open(str(tmp_path / parts[1]))
    assert ckpt.config["architectures"] == ["Qwen2ForCausalLM"]
    for name, arr in tensors.items():
        assert torch.equal(ckpt.get(hf_tensor_name(name)), torch.from_numpy(arr))
    (tmp_path / parts[2]).unlink()
    with pytest.raises(NinferError, match="part 1 of a 3-part GGUF but .*m-00003-of-00003.gguf is missing"):
        GGUFCheckpoint.open(str(tmp_path / parts[0]))


def test_llama3_rope_factors_become_hf_rope_scaling(tmp_path):
    """llama.cpp stores Llama 3.1's rope scaling as per-frequency factors (rope_freqs); the config
    must give transformers' llama3 rope the same frequencies."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import _compute_llama3_parameters

    V = gguf.GGUFValueType
    dims = dict(hidden_size=256, num_attention_heads=2, head_dim=128, max_position_embeddings=131072)
    params = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    inv_hf, _ = _compute_llama3_parameters(LlamaConfig(**dims, rope_parameters=params))
    inv_plain = 500000.0 ** -(torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    factors = (inv_plain / inv_hf.double()).float().numpy()  # what llama.cpp divides each frequency by
    md = {"llama.embedding_length": (256, V.UINT32, None), "llama.attention.head_count": (2, V.UINT32, None),
          "llama.rope.freq_base": (500000.0, V.FLOAT32, None), "llama.rope.dimension_count": (128, V.UINT32, None)}
    path = tmp_path / "llama31.gguf"
    _write(path, "llama", md, {"rope_freqs.weight": (factors, None)})
    scaling = GGUFCheckpoint.open(str(path)).config["rope_scaling"]
    assert scaling["rope_type"] == "llama3" and scaling["factor"] == pytest.approx(8.0, abs=1e-5)
    inv_ours, _ = _compute_llama3_parameters(LlamaConfig(**dims, rope_parameters={**scaling, "rope_theta": 500000.0}))
    torch.testing.assert_close(inv_ours, inv_hf, rtol=1e-6, atol=0)


def test_unreadable_quantisation_is_named(tmp_path):
    path = tmp_path / "iq.gguf"
    block, block_bytes = gguf.GGML_QUANT_SIZES[Q.IQ4_XS]
    _write(path, "llama", {}, {"w": (np.zeros((2, 512 // block * block_bytes), np.uint8), Q.IQ4_XS)})
    with pytest.raises(NinferError, match="stored as ggml IQ4_XS, which ninfer cannot read"):
        GGUFCheckpoint.open(str(path))


def test_hf_names():
    assert hf_tensor_name("blk.7.ffn_down.weight") == "model.layers.7.mlp.down_proj.weight"
    assert hf_tensor_name("blk.0.attn_output.weight") == "model.layers.0.self_attn.o_proj.weight"
    assert hf_tensor_name("blk.2.attn_v.bias") == "model.layers.2.self_attn.v_proj.bias"
    assert hf_tensor_name("blk.1.attn_k_norm.weight") == "model.layers.1.self_attn.k_norm.weight"
    assert hf_tensor_name("output_norm.weight") == "model.norm.weight"


# -- the real SmolLM2 file ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    return GGUFCheckpoint.open(smollm2_gguf)


def test_smollm2_tensors_equal_gguf_package(smollm2, smollm2_gguf):
    assert isinstance(smollm2.file.data, np.memmap)  # mapped, not read into memory
    reader = gguf.GGUFReader(smollm2_gguf)
    seen = set()
    for t in reader.tensors:
        if t.tensor_type.name in seen and not t.name.startswith("blk.29."):
            continue  # one tensor of each type, plus the whole last block
        seen.add(t.tensor_type.name)
        info = smollm2.file.tensors[t.name]
        ours = dequantize(torch.from_numpy(np.array(smollm2.file.raw_bytes(info))), info.type_name,
                          gguf.GGML_QUANT_SIZES[t.tensor_type][1], info.shape)
        ref = gguf_dequantize(t.data, t.tensor_type)
        assert torch.equal(ours, torch.from_numpy(np.array(ref)).reshape(ours.shape)), t.name
    assert seen == {"Q8_0", "Q4_1", "F32"}


@pytest.fixture(scope="module")
def transformers_smollm2(smollm2_hf):
    return smollm2_hf


def test_smollm2_names_unpermute_and_config_match_transformers(smollm2, transformers_smollm2):
    ref = transformers_smollm2.state_dict()
    names = set(smollm2.tensor_names())
    assert names == {n for n in ref if n != "lm_head.weight"}  # tied: no output.weight in the file
    for layer in (0, 13, 29):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm"):
            name = f"model.layers.{layer}.{part}.weight"
            assert smollm2.tensor_shape(name) == tuple(ref[name].shape)
            torch.testing.assert_close(smollm2.get(name), ref[name], rtol=0, atol=1e-6, msg=name)
    for name in ("model.embed_tokens.weight", "model.norm.weight"):
        torch.testing.assert_close(smollm2.get(name), ref[name], rtol=0, atol=1e-6)
    rc = transformers_smollm2.config
    c = smollm2.config
    assert c["architectures"] == [type(transformers_smollm2).__name__] == ["LlamaForCausalLM"]
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
                "tie_word_embeddings", "bos_token_id", "eos_token_id"):
        assert c[key] == getattr(rc, key), key
    assert np.float32(c["rms_norm_eps"]) == np.float32(rc.rms_norm_eps)
    rope_theta = rc.rope_parameters["rope_theta"] if getattr(rc, "rope_parameters", None) else rc.rope_theta
    assert c["rope_theta"] == rope_theta


def test_smollm2_raw_rows_follow_hf_order(smollm2):
    name = "model.layers.3.self_attn.k_proj.weight"
    raw = smollm2.raw(name)
    assert smollm2.tensor_type(name) == "Q4_1" and raw.dtype == torch.uint8
    assert raw.shape == (192, 576 // 32 * 20)  # [rows, bytes per row]
    assert torch.equal(q4_1(raw.reshape(-1, 20)).reshape(192, 576), smollm2.get(name))


def test_smollm2_chat_template_and_special_tokens(smollm2):
    assert "<|im_start|>" in smollm2.chat_template
    assert smollm2.special_tokens() == {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    assert smollm2.generation_config == {}
