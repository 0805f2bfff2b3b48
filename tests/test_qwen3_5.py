"""Qwen3.5 hybrid (Gated DeltaNet + gated attention) against transformers, from checkpoints it saved."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from ninfer import LLM, SamplingParams
from ninfer.errors import NinferError
from ninfer.weights.safetensors_dir import SafetensorsDir
from ninfer_testing import write_byte_tokenizer

LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "linear_attention",
               "full_attention", "linear_attention"]  # both kinds, a GDN layer last
TEXT = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, vocab_size=320, linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
            linear_conv_kernel_dim=4, max_position_embeddings=512, rms_norm_eps=1e-6,
            layer_types=LAYER_TYPES, eos_token_id=258, pad_token_id=0, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                             "mrope_section": [2, 1, 1], "mrope_interleaved": True})
VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
              patch_size=4, temporal_patch_size=2, spatial_merge_size=2)
H = TEXT["hidden_size"]
MTP = {"mtp.fc.weight": (H, 2 * H), "mtp.norm.weight": (H,), "mtp.pre_fc_norm_embedding.weight": (H,),
       "mtp.pre_fc_norm_hidden.weight": (H,), "mtp.layers.0.self_attn.q_proj.weight": (256, H),
       "mtp.layers.0.mlp.down_proj.weight": (H, 96)}


def make_checkpoint(path: str, multimodal: bool, seed: int):
    """A tiny random Qwen3.5 saved by transformers, noise on every norm, plus mtp.* tensors."""
    import transformers

    torch.manual_seed(seed)
    if multimodal:
        cfg = transformers.Qwen3_5Config(text_config=TEXT, vision_config=VISION, tie_word_embeddings=False)
        model = transformers.Qwen3_5ForConditionalGeneration(cfg)
    else:
        model = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**TEXT))
    model = model.float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # zero-centred (1 + w) and plain-w norms both get noise
                p.add_(torch.randn_like(p) * 0.3)
            elif name.endswith(("A_log", "dt_bias")):
                p.copy_(torch.randn_like(p) * 0.5)
            elif "visual" not in name:
                p.normal_(0, 0.1)
    model.save_pretrained(path)
    write_byte_tokenizer(path, TEXT["vocab_size"])
    # transformers has no MTP module: add the head's tensors the way published checkpoints carry them
    file = f"{path}/model.safetensors"
    tensors = load_file(file)
    gen = torch.Generator().manual_seed(seed)
    tensors.update({n: torch.randn(s, generator=gen) for n, s in MTP.items()})
    save_file(tensors, file, metadata={"format": "pt"})
    return model


@pytest.fixture(scope="module", params=["multimodal", "text"])
def pair(request, tmp_path_factory):
    multimodal = request.param == "multimodal"
    path = str(tmp_path_factory.mktemp(request.param))
    hf = make_checkpoint(path, multimodal, seed=int(multimodal))
    read: list[str] = []
    original = SafetensorsDir.get

    def spy(self, name):
        read.append(name)
        return original(self, name)

    SafetensorsDir.get = spy
    try:
        llm = LLM(model=path, backend="reference", device="cpu", dtype="float32", max_context=256, progress=False)
    finally:
        SafetensorsDir.get = original
    return hf, llm, read, path


def prompt(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 250, (n,), generator=g).tolist()


def hf_logits(hf, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0]


def test_config_is_recognised_as_the_hybrid(pair):
    _, llm, _, _ = pair
    cfg = llm.config
    assert cfg.layer_types == LAYER_TYPES
    assert cfg.rotary_dim == 8 and cfg.rope_theta == 1e7
    assert cfg.norm_zero_centered and cfg.qk_norm and cfg.attn_output_gate


def test_logits_match_transformers(pair):
    hf, llm, _, _ = pair
    ids = prompt(75, seed=1)  # over one 64-token GDN chunk
    llm.runner.reset()
    got = llm.model.logits(llm.runner.forward(ids, "prefill"))
    torch.testing.assert_close(got, hf_logits(hf, ids), rtol=1e-4, atol=1e-4)


def test_greedy_tokens_equal_transformers_generate(pair):
    hf, llm, _, _ = pair
    ids = prompt(21)
    out = llm.generate(ids, SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True))
    with torch.no_grad():
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=12, min_new_tokens=12, do_sample=False,
                          pad_token_id=0)[0, len(ids):].tolist()
    assert out.token_ids == ref


def test_prefill_then_decode_equals_one_prefill(pair):
    _, llm, _, _ = pair
    ids = prompt(40, seed=2)
    n = 31
    llm.runner.reset()
    steps = [llm.runner.prefill(ids[:n])] + [llm.runner.decode(t) for t in ids[n:]]
    llm.runner.reset()
    full = llm.model.logits(llm.runner.forward(ids, "prefill"))
    for i, logits in enumerate(steps):
        torch.testing.assert_close(logits, full[n - 1 + i], rtol=1e-4, atol=1e-4)


def test_chunked_prefill_continues_the_state(pair):
    _, llm, _, _ = pair
    ids = prompt(50, seed=5)
    llm.runner.reset()
    full = llm.runner.prefill(ids)
    llm.runner.reset()
    llm.runner.prefill_chunk = 16  # 16 + 16 + 16 + 2, each chunk starting from the last one's state
    try:
        chunked = llm.runner.prefill(ids)
    finally:
        llm.runner.prefill_chunk = 2048
    torch.testing.assert_close(chunked, full, rtol=1e-4, atol=1e-4)


def test_prompt_extending_the_cached_sequence_continues_its_state(pair):
    _, llm, _, _ = pair
    ids = prompt(36, seed=7)
    llm.runner.reset()
    fresh = llm.runner.prefill(ids)
    llm.runner.reset()
    llm.runner.prefill(ids[:20])
    extended = llm.runner.prefill(ids)  # runs only the 16 new tokens, from the kept state
    torch.testing.assert_close(extended, fresh, rtol=1e-4, atol=1e-4)
    other = llm.runner.prefill(ids[:10] + prompt(5, seed=8))  # diverges: must start over
    llm.runner.reset()
    torch.testing.assert_close(other, llm.runner.prefill(ids[:10] + prompt(5, seed=8)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("accepted", [0, 2, 5])
def test_verify_then_keep_accepted_equals_recomputation(pair, accepted):
    """Verify k=5 tokens, keep the state at the accepted length, continue: as if never drafted."""
    hf, llm, _, _ = pair
    ids = prompt(30, seed=3)
    n, k = 20, 5
    llm.runner.reset()
    llm.runner.prefill(ids[:n])
    drafted = ids[n:n + k]
    verified = llm.runner.verify(drafted)  # [k, V]
    torch.testing.assert_close(verified, hf_logits(hf, ids[:n + k])[n:], rtol=1e-4, atol=1e-4)
    llm.runner.truncate(n + accepted)  # rolls KV and recurrent state back to the accepted length
    nxt = ids[n + k:n + k + 3]  # continue with different tokens than the rejected drafts
    after = [llm.runner.decode(t) for t in nxt]
    ref = hf_logits(hf, ids[:n + accepted] + nxt)[n + accepted:]
    for i in range(len(nxt)):
        torch.testing.assert_close(after[i], ref[i], rtol=1e-4, atol=1e-4)


def test_snapshot_restore_after_k_steps_equals_recomputation(pair):
    _, llm, _, _ = pair
    ids = prompt(30, seed=4)
    n = 22
    llm.runner.reset()
    llm.runner.prefill(ids[:n])
    snap = llm.runner.state.snapshot()
    first = [llm.runner.decode(t) for t in ids[n:]]
    llm.runner.state.restore(snap)
    llm.runner.tokens = llm.runner.tokens[:n]  # KV past n is overwritten by the next forward
    again = [llm.runner.decode(t) for t in ids[n:]]
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rollback_beyond_the_last_verify_is_refused(pair):
    _, llm, _, _ = pair
    llm.runner.reset()
    llm.runner.prefill(prompt(12, seed=6))
    llm.runner.decode(7)
    with pytest.raises(RuntimeError, match="cannot go back"):
        llm.runner.truncate(5)


def test_vision_weights_are_never_read_and_mtp_weights_are_kept(pair):
    _, llm, read, path = pair
    assert read and not [n for n in read if "visual" in n]
    assert sorted(llm.model.extra_weights) == sorted(MTP)
    stored = load_file(f"{path}/model.safetensors")
    for name in MTP:
        torch.testing.assert_close(llm.model.extra_weights[name], stored[name])
    if "multimodal" in path:
        assert any("visual" in n for n in stored)  # they were there to skip


def test_memory_report_counts_the_recurrent_state(pair):
    from ninfer.memory import memory_report

    _, _, _, path = pair
    rep = memory_report(path)
    # 4 GDN layers x fp32 (conv window: (2*2*16 + 4*16) channels x 3, state: 4 heads x 16 x 16)
    expect = 4 * 4 * ((2 * 2 * 16 + 4 * 16) * 3 + 4 * 16 * 16)
    assert rep["recurrent state per sequence"] == f"{expect / 2**20:.1f} MiB"


def test_27b_state_size():
    from ninfer.config.model import model_config_from_hf
    from ninfer.models.qwen3_5 import state_bytes

    raw = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5_text",
           "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64, "num_attention_heads": 24,
           "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 248320, "linear_num_key_heads": 16,
           "linear_num_value_heads": 48, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
           "full_attention_interval": 4}
    cfg = model_config_from_hf(raw)
    assert cfg.attention_layers == list(range(3, 64, 4))
    conv_channels = 2 * 16 * 128 + 48 * 128
    assert state_bytes(cfg) == 48 * 4 * (conv_channels * 3 + 48 * 128 * 128)


def test_config_without_gdn_shape_is_a_clear_error():
    from ninfer.config.model import model_config_from_hf

    raw = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 320}
    with pytest.raises(NinferError, match="linear_num_key_heads"):
        model_config_from_hf(raw)


def _bench_module():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "bench", "hybrid_reference.py")
    spec = importlib.util.spec_from_file_location("hybrid_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_hybrid_bench_cpu_path_agrees_and_fails_loudly(capsys, monkeypatch):
    bench = _bench_module()
    args = ["--tiny", "--device", "cpu", "--prompt", "24", "--decode", "2", "--layers", "4"]
    assert bench.main(args) == 0
    assert "top-1 agreement over 24 positions | 100.0%" in capsys.readouterr().out
    monkeypatch.setitem(bench.MAX_REL_L2, torch.float32, 0.0)  # any difference now counts as a failure
    assert bench.main(args) == 1
    assert "FAIL" in capsys.readouterr().err


def test_quantised_gdn_projection_takes_the_gemms_one_launch_form(tmp_path, monkeypatch):
    """Quantised in_proj and in_proj_ba: where their GEMM offers ``with_gdn_in`` (the GPU's one-launch projection +
    conv + gates, ninfer.quant.gpu.quant_gdn_in_proj), the layer joins them into one weight (its Linears then hold views
    of it), hands decode steps to that form and prefill to one GEMM; where the form declines a call, the ops run one
    by one. Logits equal the layer's without the form (the reference GEMM offers none) at every step."""
    import dataclasses

    from ninfer.quant.layout import linear, quantize_rtn
    from ninfer.reference import gdn as ref

    make_checkpoint(str(tmp_path), multimodal=False, seed=5)

    def load():
        llm = LLM(model=str(tmp_path), backend="reference", device="cpu", dtype="float32", max_context=256,
                  progress=False)
        gdn = [layer.mixer for layer in llm.model.layers if hasattr(layer.mixer, "in_proj_ba")]
        for j, m in enumerate(gdn):  # int4 | int4 in the first layer (one format: joined), int4 | int8 elsewhere
            m.in_proj.weight = quantize_rtn(m.in_proj.weight, 4, 32, symmetric=False)
            m.in_proj_ba.weight = quantize_rtn(m.in_proj_ba.weight, 4 if j == 0 else 8, 32, symmetric=False)
        return llm

    ids = prompt(30, seed=7)

    def run(llm):
        llm.runner.reset()
        return [llm.runner.prefill(ids[:20])] + [llm.runner.decode(t) for t in ids[20:]]

    want = run(load())
    llm = load()
    gdn = [layer.mixer for layer in llm.model.layers if hasattr(layer.mixer, "in_proj_ba")]
    layout = gdn[0].in_proj.weight.layout
    calls = []

    def gemm(x, w, b=None):
        return linear(x, w, b)

    def one_launch(x, w, conv_w, conv_state, A_log, dt_bias, conv_dim, z_dim):
        calls.append(w)
        if len(calls) % 2:  # every other call declined
            return None
        H = (w.shape[0] - conv_dim - z_dim) // 2
        mixed, z, b, a = linear(x, w).split([conv_dim, z_dim, H, H], dim=-1)
        y, _ = ref.causal_conv1d_update(mixed, conv_w, None, conv_state, out_state=conv_state)
        g, beta = ref.gdn_gates(a, b, A_log, dt_bias)
        return y, z, g, beta

    gemm.with_gdn_in = one_launch
    monkeypatch.setitem(llm.ops.gemm, layout, dataclasses.replace(llm.ops.gemm[layout], fn=gemm))
    got = run(llm)
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=f"step {i}")
    joined = gdn[0]._qin_all[0]
    assert joined.shape == (gdn[0].in_proj.out_features + gdn[0].in_proj_ba.out_features, 64)
    assert gdn[0].in_proj.weight.qweight.data_ptr() == joined.qweight.data_ptr()
    assert gdn[0].in_proj_ba.weight.scales.data_ptr() == joined.scales[gdn[0].in_proj.out_features:].data_ptr()
    assert all(m._qin_all[0] is None for m in gdn[1:])  # int4 | int8: formats differ, nothing joined, nothing offered
    assert calls and all(w is joined for w in calls) and len(calls) == len(ids) - 20


def test_output_gate_rides_in_attention_only_from_attentions_backend(tmp_path, monkeypatch):
    """The gated attention layers call ``attention_gated`` (the gate in attention's last kernel on the GPU backends)
    where the backend serving ``paged_attention`` serves it too; a backend that registers only ``paged_attention``
    keeps its attention, the gate after it as ``sigmoid_mul``, not the reference's attention. Same logits either
    way."""
    import dataclasses

    make_checkpoint(str(tmp_path), multimodal=False, seed=3)
    ids = prompt(24, seed=2)

    def run(llm):
        llm.runner.reset()
        return [llm.runner.prefill(ids[:16])] + [llm.runner.decode(t) for t in ids[16:]]

    def counting(llm, op, backend=None):
        impl, calls = llm.ops.impls[op], []

        def fn(*args, **kwargs):
            calls.append(op)
            return impl.fn(*args, **kwargs)

        monkeypatch.setitem(llm.ops.impls, op, dataclasses.replace(impl, fn=fn, backend=backend or impl.backend))
        return calls

    llm = LLM(model=str(tmp_path), backend="reference", device="cpu", dtype="float32", max_context=256,
              progress=False)
    gated, attention = counting(llm, "attention_gated"), counting(llm, "paged_attention")
    want = run(llm)
    n_attn = sum(1 for layer in llm.model.layers if hasattr(layer.mixer, "_gate_in_attention"))
    assert n_attn and len(gated) == n_attn * (1 + len(ids) - 16) and not attention
    monkeypatch.undo()
    gated, attention = counting(llm, "attention_gated"), counting(llm, "paged_attention", backend="other")
    gate = counting(llm, "sigmoid_mul")
    got = run(llm)
    assert not gated and len(attention) == len(gate) == n_attn * (1 + len(ids) - 16)
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"step {i}")


def test_quantize_reads_the_published_multimodal_layout(tmp_path):
    """Qwen3.5 / 3.6 are published as Qwen3_5ForConditionalGeneration, the decoder under model.language_model:
    `ninfer quantize` quantises those blocks (vision tower and MTP head kept dense), and the result loads and
    gives transformers' logits for the same dequantised weights. Before session 20 it found nothing to quantise."""
    from safetensors import safe_open

    from ninfer.quant.compressed_tensors import CompressedTensorsDir
    from ninfer.quant.quantize import quantize_checkpoint

    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    hf = make_checkpoint(src, multimodal=True, seed=21)
    qcfg = quantize_checkpoint(src, dst, bits=4, group_size=32, progress=False, dtype=torch.float32)
    with safe_open(f"{dst}/model.safetensors", "pt") as f:
        names = set(f.keys())
    packed = [n for n in names if n.endswith(".weight_packed")]
    assert packed and all(n.startswith("model.language_model.layers.") for n in packed)
    assert any(n.startswith("model.visual.") and n.endswith(".weight") for n in names)  # kept, dense
    assert "mtp.layers.0.mlp.down_proj.weight" in names
    # the config's "Linear" target would take them too: the ignore list names each dense Linear
    assert {"mtp.layers.0.mlp.down_proj", "model.visual.blocks.0.attn.qkv"} <= set(qcfg["ignore"])
    # the reference: transformers' model with the checkpoint's weights as its compressed-tensors reader gives them
    ck = CompressedTensorsDir.open(dst)
    state = hf.state_dict()
    hf.load_state_dict({n: ck.get(n) if n in ck.tensor_names() else t for n, t in state.items()})
    ids = prompt(24, seed=3)
    q = LLM(dst, backend="reference", device="cpu", max_context=64, progress=False, dtype=torch.float32)
    torch.testing.assert_close(q.runner.prefill(ids), hf_logits(hf, ids)[-1], rtol=1e-4, atol=1e-4)


def test_quantize_with_nothing_to_quantise_writes_nothing(tmp_path):
    import json

    from safetensors.torch import save_file

    from ninfer.errors import NinferError
    from ninfer.quant.quantize import quantize_checkpoint

    src = tmp_path / "src"
    src.mkdir()
    save_file({"model.layers.0.mlp.down_proj.weight": torch.randn(40, 72),
               "model.embed_tokens.weight": torch.randn(10, 40)}, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    with pytest.raises(NinferError, match="nothing to quantise"):
        quantize_checkpoint(str(src), str(tmp_path / "dst"), bits=4, group_size=32, progress=False)
    assert not (tmp_path / "dst").exists()  # so a rerun with a fixed source is not refused as "not empty"


def test_gated_deltanet_parts_with_the_right_total_but_another_split_are_refused(tmp_path):
    """in_proj_qkv | in_proj_z are concatenated at load: sizes swapped between them used to load silently."""
    make_checkpoint(str(tmp_path), False, seed=3)
    file = str(tmp_path / "model.safetensors")
    t = load_file(file)
    a, b = "model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.0.linear_attn.in_proj_z.weight"
    both = torch.cat([t[a], t[b]])
    rows = t[a].shape[0], t[b].shape[0]
    t[a], t[b] = both[:rows[0] - 16], both[rows[0] - 16:]
    save_file(t, file, metadata={"format": "pt"})
    with pytest.raises(NinferError, match=rf"{a}, {b} have {rows[0] - 16}, {rows[1] + 16} rows but the config "
                                          rf"implies {rows[0]}, {rows[1]}"):
        LLM(model=str(tmp_path), backend="reference", device="cpu", max_context=64, progress=False)
