"""Each architecture against transformers' own implementation, from a checkpoint it saved."""

from __future__ import annotations

import pytest
import torch

from ninfer import LLM, SamplingParams
from ninfer_testing import make_tiny_checkpoint

ARCHS = ["llama", "qwen2", "qwen3"]


@pytest.fixture(scope="module", params=ARCHS)
def pair(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(request.param))
    hf = make_tiny_checkpoint(request.param, path, seed=ARCHS.index(request.param))
    llm = LLM(model=path, backend="reference", device="cpu", max_context=256, progress=False)
    return hf, llm


def prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 250, (n,), generator=g).tolist()


def test_greedy_tokens_equal_transformers_generate(pair):
    hf, llm = pair
    ids = prompt(23)
    out = llm.generate(ids, SamplingParams(temperature=0.0, max_tokens=24))
    with torch.no_grad():  # both stop at the config's EOS (258) if it comes, returning it last
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                          pad_token_id=0)[0, len(ids):].tolist()
    assert out.token_ids == ref
    assert out.finish_reason == ("stop" if ref[-1] == 258 else "length")
    assert out.stats["generated_tokens"] == len(ref) and out.stats["prompt_tokens"] == 23


def test_logits_match_transformers(pair):
    hf, llm = pair
    ids = prompt(40, seed=1)
    logits = llm.runner.prefill(ids)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)


def test_prefill_then_decode_equals_one_prefill(pair):
    _, llm = pair
    ids = prompt(37, seed=2)  # spans several KV blocks of 64? no: crosses block edges of the pool
    n, m = 30, 7
    llm.runner.reset()
    llm.runner.prefill(ids[:n])
    step = [llm.runner.decode(t) for t in ids[n:]]
    llm.runner.reset()
    full = llm.runner.forward(ids, "prefill")
    full_logits = llm.model.logits(full)
    for i in range(m):
        torch.testing.assert_close(step[i], full_logits[n + i], rtol=1e-4, atol=1e-4)


def test_prefix_reuse_gives_same_logits(pair):
    _, llm = pair
    ids = prompt(50, seed=3)
    llm.runner.reset()
    a = llm.runner.prefill(ids)
    llm.runner.prefill(ids[:20] + prompt(10, seed=4))  # different tail
    b = llm.runner.prefill(ids)  # reuses the shared 20-token prefix
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_token_ids_out_of_vocabulary_is_a_clear_error(pair):
    from ninfer.errors import NinferError

    _, llm = pair
    with pytest.raises(NinferError, match="outside the vocabulary"):
        llm.generate([1, 2, 10**6], SamplingParams(max_tokens=2))


def test_prompt_longer_than_context_is_a_clear_error(pair):
    from ninfer.errors import ContextLengthError

    _, llm = pair
    with pytest.raises(ContextLengthError, match="context holds 256"):
        llm.generate(prompt(300), SamplingParams(max_tokens=2))


def test_sharded_safetensors_with_index_load(tmp_path):
    """A checkpoint that transformers splits into shards with an index loads to the same logits."""
    import os

    hf = make_tiny_checkpoint("qwen2", str(tmp_path / "one"), seed=5)
    hf.save_pretrained(str(tmp_path / "sharded"), max_shard_size="100KB")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.link(tmp_path / "one" / f, tmp_path / "sharded" / f)
    shards = [f for f in os.listdir(tmp_path / "sharded") if f.endswith(".safetensors")]
    assert len(shards) > 1 and os.path.exists(tmp_path / "sharded" / "model.safetensors.index.json")
    llm = LLM(model=str(tmp_path / "sharded"), backend="reference", device="cpu", max_context=64, progress=False)
    ids = prompt(20, seed=6)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(llm.runner.prefill(ids), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rope", [
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64, "beta_fast": 16, "beta_slow": 2,
     "attention_factor": 1.3},
    {"rope_type": "linear", "factor": 2.0},
])
def test_rope_scaling_matches_transformers(tmp_path, rope):
    """YaRN (Qwen3's long-context setting) and linear scaling: the same logits as transformers, at positions past
    the pretraining context (before session 20 YaRN was accepted and ignored)."""
    hf = make_tiny_checkpoint("qwen3", str(tmp_path), seed=7, rope_parameters={"rope_theta": 10000.0, **rope})
    llm = LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=320, progress=False)
    ids = prompt(300, seed=8)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(llm.runner.prefill(ids), ref, rtol=1e-4, atol=1e-4)


def test_an_unimplemented_rope_scaling_is_refused(tmp_path):
    import json

    from ninfer.errors import NinferError

    make_tiny_checkpoint("qwen3", str(tmp_path), seed=7)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "longrope", "factor": 4.0, "short_factor": [1.0] * 16,
                           "long_factor": [1.0] * 16}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(NinferError, match="longrope.*not supported"):
        LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)


def test_llama_biases_on_every_projection_match_transformers(tmp_path):
    """Llama's attention_bias puts a bias on o_proj as well as q/k/v, and mlp_bias one on gate, up and down
    (before session 20 those were left in the checkpoint and the logits were wrong)."""
    hf = make_tiny_checkpoint("llama", str(tmp_path / "b"), seed=9, attention_bias=True, mlp_bias=True)
    llm = LLM(model=str(tmp_path / "b"), backend="reference", device="cpu", max_context=64, progress=False)
    ids = prompt(30, seed=10)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(llm.runner.prefill(ids), ref, rtol=1e-4, atol=1e-4)
    hf3 = make_tiny_checkpoint("qwen3", str(tmp_path / "q"), seed=11, attention_bias=True)
    llm3 = LLM(model=str(tmp_path / "q"), backend="reference", device="cpu", max_context=64, progress=False)
    with torch.no_grad():
        ref3 = hf3(torch.tensor([ids])).logits[0, -1]
    torch.testing.assert_close(llm3.runner.prefill(ids), ref3, rtol=1e-4, atol=1e-4)


def test_an_activation_other_than_silu_is_refused(tmp_path):
    from ninfer.errors import NinferError

    make_tiny_checkpoint("llama", str(tmp_path), seed=9, hidden_act="gelu")
    with pytest.raises(NinferError, match="hidden_act 'gelu' is not supported"):
        LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)


def test_checkpoints_ninfer_cannot_read_are_refused_in_one_sentence(tmp_path):
    """FP8 weights (Qwen's -FP8 releases) loaded as plain tensors would give wrong outputs silently; a broken
    shard index or a missing shard must say so, not raise a KeyError or blame truncation."""
    import json
    import os

    from safetensors.torch import load_file, save_file

    from ninfer.errors import NinferError

    def fresh(name):
        path = tmp_path / name
        make_tiny_checkpoint("qwen3", str(path), seed=12)
        return path

    fp8 = fresh("fp8")
    cfg = json.loads((fp8 / "config.json").read_text())
    (fp8 / "config.json").write_text(json.dumps({**cfg, "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}))
    with pytest.raises(NinferError, match="quantised with fp8, which ninfer does not read"):
        LLM(model=str(fp8), backend="reference", device="cpu", max_context=64, progress=False)
    raw = fresh("raw8")  # fp8 tensors and no quantization_config at all
    t = load_file(str(raw / "model.safetensors"))
    t["model.layers.0.mlp.down_proj.weight"] = t["model.layers.0.mlp.down_proj.weight"].to(torch.float8_e4m3fn)
    save_file(t, str(raw / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(NinferError, match="down_proj.weight is stored in float8_e4m3fn"):
        LLM(model=str(raw), backend="reference", device="cpu", max_context=64, progress=False)
    idx = fresh("index")
    (idx / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
    with pytest.raises(NinferError, match="has no weight_map"):
        LLM(model=str(idx), backend="reference", device="cpu", max_context=64, progress=False)
    gone = fresh("gone")
    names = list(load_file(str(gone / "model.safetensors")))
    os.rename(gone / "model.safetensors", gone / "model-00001-of-00002.safetensors")
    weight_map = {n: "model-00001-of-00002.safetensors" for n in names}
    weight_map[names[-1]] = "model-00002-of-00002.safetensors"
    (gone / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(NinferError, match=r"model-00002-of-00002.safetensors is missing") as e:
        LLM(model=str(gone), backend="reference", device="cpu", max_context=64, progress=False)
    assert "truncated" not in str(e.value)


def test_norm_and_embedding_shapes_are_checked_at_load(tmp_path):
    """A norm or embedding of the wrong size used to load and fail later inside generate (or broadcast silently)."""
    from safetensors.torch import load_file, save_file

    from ninfer.errors import NinferError

    for name, shape in (("model.layers.1.post_attention_layernorm.weight", (1,)),
                        ("model.norm.weight", (128,)), ("model.embed_tokens.weight", (300, 64))):
        path = tmp_path / name.replace(".", "_")
        make_tiny_checkpoint("llama", str(path), seed=13)
        t = load_file(str(path / "model.safetensors"))
        t[name] = torch.ones(shape)
        save_file(t, str(path / "model.safetensors"), metadata={"format": "pt"})
        with pytest.raises(NinferError, match=rf"has shape \({shape[0]},.*config and weights disagree"):
            LLM(model=str(path), backend="reference", device="cpu", max_context=64, progress=False)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_fused_parts_with_the_right_total_but_another_split_are_refused(tmp_path, kind):
    """q|k|v and gate|up are concatenated at load: parts whose sizes are swapped but add up to the fused total used
    to load and compute garbage (the Gated DeltaNet's qkv|z: tests/test_qwen3_5.py)."""
    from safetensors.torch import load_file, save_file

    from ninfer.errors import NinferError

    make_tiny_checkpoint(kind, str(tmp_path), seed=13)
    t = load_file(str(tmp_path / "model.safetensors"))
    names = {"llama": ("model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"),
             "qwen3": ("model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight")}[kind]
    a, b = (t[n] for n in names)
    both = torch.cat([a, b])
    t[names[0]], t[names[1]] = both[:a.shape[0] - 8], both[a.shape[0] - 8:]
    save_file(t, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(NinferError, match=rf"{names[0]}, {names[1]}.* have {a.shape[0] - 8}, {b.shape[0] + 8}(, \d+)? "
                                          rf"rows but the config implies {a.shape[0]}, {b.shape[0]}"):
        LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)


def test_tensors_the_model_does_not_read_are_named_on_stderr(tmp_path, capsys):
    """A bias the config does not announce, or a layer past num_hidden_layers, used to be dropped silently; a clean
    checkpoint loads without a word."""
    from safetensors.torch import load_file, save_file

    make_tiny_checkpoint("llama", str(tmp_path), seed=13)
    LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)
    assert "does not read" not in capsys.readouterr().err
    t = load_file(str(tmp_path / "model.safetensors"))
    t["model.layers.0.self_attn.o_proj.bias"] = torch.ones(t["model.layers.0.self_attn.o_proj.weight"].shape[0])
    t["model.layers.9.mlp.down_proj.weight"] = torch.ones(4, 4)
    save_file(t, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)
    err = capsys.readouterr().err
    assert "has 2 tensor(s) this model does not read (model.layers.0.self_attn.o_proj.bias, " \
           "model.layers.9.mlp.down_proj.weight)" in err and err.count("\n") == 1


def test_a_multimodal_wrapper_of_a_known_text_model_is_refused_by_its_name(tmp_path):
    import json

    from ninfer.errors import NinferError

    make_tiny_checkpoint("llama", str(tmp_path), seed=13)
    text = {k: v for k, v in json.loads((tmp_path / "config.json").read_text()).items() if k != "architectures"}
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlavaForConditionalGeneration"],
                                                      "model_type": "llava", "text_config": text}))
    with pytest.raises(NinferError, match="Unsupported architecture LlavaForConditionalGeneration"):
        LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)


def test_quantised_fused_parts_with_another_split_are_refused(tmp_path):
    """The same check on a compressed-tensors checkpoint, whose parts stay quantised at load (they are fused as
    codes and scales, never as dense tensors): gate and up each with their packed codes, scales and recorded
    shape moved by 8 rows."""
    from safetensors.torch import load_file, save_file

    from ninfer.errors import NinferError
    from ninfer.quant.quantize import quantize_checkpoint

    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tiny_checkpoint("llama", str(src), seed=13)
    quantize_checkpoint(str(src), str(dst), bits=4, group_size=32, progress=False)
    LLM(model=str(dst), backend="reference", device="cpu", max_context=64, progress=False)  # loads as written
    f = next(dst.glob("*.safetensors"))
    t = load_file(str(f))
    gate, up = "model.layers.0.mlp.gate_proj.", "model.layers.0.mlp.up_proj."
    rows = int(t[gate + "weight_shape"][0])
    for part in ("weight_packed", "weight_scale"):
        both = torch.cat([t[gate + part], t[up + part]])
        t[gate + part], t[up + part] = both[:rows - 8].clone(), both[rows - 8:].clone()
    t[gate + "weight_shape"] = t[gate + "weight_shape"] - torch.tensor([8, 0], dtype=t[gate + "weight_shape"].dtype)
    t[up + "weight_shape"] = t[up + "weight_shape"] + torch.tensor([8, 0], dtype=t[up + "weight_shape"].dtype)
    save_file(t, str(f), metadata={"format": "pt"})
    with pytest.raises(NinferError, match=rf"{gate}weight, {up}weight have {rows - 8}, {rows + 8} rows but the "
                                          rf"config implies {rows}, {rows}"):
        LLM(model=str(dst), backend="reference", device="cpu", max_context=64, progress=False)
