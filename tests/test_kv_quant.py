"""Quantised KV formats: int8 (group 64) and int4 with a block Hadamard rotation of K.

The reference write/attention for each format is checked against float attention over the same
keys and values, the rotation against its algebra, and the engine wiring end to end.
"""

import pytest
import torch

from ninfer.errors import NinferError
from ninfer.kv.paged import PagedKVCache
from ninfer.ops import DeviceSpec, resolve
from ninfer.quant import kv_ops
from ninfer.quant.capacity import plan_max_context
from ninfer.quant.kv_cache import bytes_per_token, dequantize_vectors, hadamard, rotate
from ninfer.reference import ops as ref

HK, HQ, D, BS = 2, 6, 64, 16


def _pools(fmt, blocks=8):
    cache = PagedKVCache(1, blocks, BS, HK, D, torch.float32, torch.device("cpu"), fmt)
    return cache.k[0], cache.v[0]


def _kv(T, outlier=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    k, v = torch.randn(T, HK, D, generator=g), torch.randn(T, HK, D, generator=g)
    if outlier:  # real keys have a few channels far larger than the rest
        k[..., 3] *= 20.0
        k[..., 17] += 8.0
    return k, v


def _attend(fmt, T, outlier=False):
    """Quantised-pool attention and float attention over the same keys/values (positions 0..T-1)."""
    k, v = _kv(T, outlier)
    q = torch.randn(T, HQ, D, generator=torch.Generator().manual_seed(1))
    table = torch.tensor([5, 2, 7, 0, 1, 3, 4, 6][: (T + BS - 1) // BS], dtype=torch.int32)  # scattered blocks
    pos = torch.arange(T)
    slots = table[pos // BS].long() * BS + pos % BS
    kc, vc = _pools(fmt)
    kv_ops.write_kv(k, v, kc, vc, slots)
    out = kv_ops.paged_attention(q, kc, vc, table, pos, D ** -0.5)
    kf = torch.zeros(8, BS, HK, D)
    vf = torch.zeros(8, BS, HK, D)
    ref.write_kv(k, v, kf, vf, slots)
    want = ref.paged_attention(q, kf, vf, table, pos, D ** -0.5)
    return out, want, (kc, vc, k, v, slots)


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_hadamard_is_orthogonal_and_keeps_scores():
    for n in (16, 64, 128):
        h = hadamard(n)
        torch.testing.assert_close(h @ h.t(), torch.eye(n), atol=1e-6, rtol=0)
    q, k = torch.randn(5, 3, 96), torch.randn(7, 3, 96)  # 96 = 3 blocks of 32
    torch.testing.assert_close(torch.einsum("thd,lhd->htl", rotate(q), rotate(k)), torch.einsum("thd,lhd->htl", q, k),
                               atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(rotate(rotate(q)), q, atol=1e-5, rtol=0)  # its own inverse


def test_int8_pool_layout_and_round_trip():
    kc, vc = _pools("int8")
    assert kc.data.dtype == torch.int8 and tuple(kc.data.shape) == (8, BS, HK, D)
    assert tuple(kc.scale.shape) == (8, BS, HK, D // 64) and kc.scale.dtype == torch.float16
    out, want, (kc, vc, k, v, slots) = _attend("int8", 40)
    assert torch.allclose(kc.center, k.mean(0))  # the first write fixes K's per-channel offset
    back = dequantize_vectors(kc.data.view(-1, HK, D)[slots], kc.scale.view(-1, HK, 1)[slots], None, kc)
    stored = rotate(k - kc.center)  # centred (softmax ignores a shift shared by every key), then rotated
    step = kc.scale.view(-1, HK, 1)[slots].float()
    assert ((back - stored).abs() <= 0.5 * step + 1e-3 * step).all()  # round to nearest per group of 64
    vback = dequantize_vectors(vc.data.view(-1, HK, D)[slots], vc.scale.view(-1, HK, 1)[slots], None, vc)
    assert _rel(rotate(vback), v) < 0.01
    assert _rel(out, want) < 1e-2


def test_int4_stores_rotated_centred_keys_and_plain_values():
    kc, vc = _pools("int4")
    assert kc.rotate and not vc.rotate and kc.data.dtype == torch.uint8 and kc.data.shape[-1] == D // 2
    assert vc.center is None  # V is not centred: its offset would not cancel in attention
    out, want, (kc, vc, k, v, slots) = _attend("int4", 33)
    kb = dequantize_vectors(kc.data.view(-1, HK, D // 2)[slots], kc.scale.view(-1, HK, 1)[slots],
                            kc.offset.view(-1, HK, 1)[slots], kc)
    assert torch.allclose(kc.center, k.mean(0))
    assert _rel(rotate(kb) + kc.center, k) < 0.15
    assert _rel(out, want) < 0.15
    plain_k, plain_v = _pools("int4_norot")
    assert not plain_k.rotate and not plain_v.rotate


def test_rotation_makes_int4_keys_with_outliers_far_better():
    rot, want, _ = _attend("int4", 64, outlier=True)
    plain, _, _ = _attend("int4_norot", 64, outlier=True)
    err_rot, err_plain = _rel(rot, want), _rel(plain, want)
    assert err_rot < 0.5 * err_plain, (err_rot, err_plain)


def test_registry_picks_the_format_ops():
    spec = DeviceSpec.of("cpu", torch.float32)
    for fmt in ("int8", "int4", "int4_norot"):
        ops = resolve("reference", spec, kv_format=fmt)
        assert ops.impls["paged_attention"].name == f"reference.paged_attention_{fmt}"
        assert ops.impls["write_kv"].name == f"reference.write_kv_{fmt}"
    plain = resolve("reference", spec)
    assert plain.impls["paged_attention"].name == "reference.paged_attention"
    assert plain.impls["linear"].name == "reference.linear"
    assert plain.linear_for("int4_grouped").__module__ == "ninfer.quant.layout"
    with pytest.raises(NinferError, match="layout"):
        plain.linear_for("fp3_magic")


def test_bytes_per_token_and_capacity_planner():
    from types import SimpleNamespace

    bf16 = bytes_per_token("bf16", 30, 3, 64, torch.bfloat16)
    assert bf16 == 2 * 30 * 3 * 64 * 2
    assert bytes_per_token("int8", 30, 3, 64, torch.bfloat16) == 2 * 30 * 3 * (64 + 2)
    assert bytes_per_token("int4", 30, 3, 64, torch.bfloat16) == 2 * 30 * 3 * (32 + 4)
    # Qwen3.5-27B-shaped: 16 of 64 layers are full attention
    cfg = SimpleNamespace(attention_layers=list(range(16)), num_kv_heads=4, head_dim=256, rotary_dim=64,
                          hidden_size=5120, intermediate_size=17408, num_heads=24, vocab_size=151936,
                          max_position_embeddings=262144)
    budget, weights = 22 * 2**30, 14 * 2**30  # a 27B in 4-bit on a 22 GB card
    ctx = {f: plan_max_context(cfg, budget, f, weights, torch.bfloat16) for f in ("bf16", "int8", "int4")}
    assert ctx["bf16"] < ctx["int8"] < ctx["int4"] and ctx["int4"] > 100_000
    assert all(c % 64 == 0 for c in ctx.values())
    per_tok = bytes_per_token("int8", 16, 4, 256, torch.bfloat16) + 64 * 4
    assert (ctx["int8"] + 64) * per_tok > budget - weights - 2 * 2**30  # nearly all that is left
    with pytest.raises(NinferError, match="budget"):
        plan_max_context(cfg, 10 * 2**30, "int4", weights, torch.bfloat16)


def test_the_planner_counts_the_prefill_copies(monkeypatch):
    """A prefill chunk's attention over a dense KV cache copies the context's K and V of one layer (and repeats them to
    the query heads below sm_80): the planner leaves room for it; over a quantised cache kvq_prefill copies nothing,
    unless NINFER_KVQ_PREFILL=gather (one dequantised copy). tests/gpu measures these per-token figures."""
    from types import SimpleNamespace

    from ninfer.kernels import kv_quant
    from ninfer.quant.capacity import prefill_copy_bytes_per_token

    cfg = SimpleNamespace(attention_layers=list(range(16)), num_kv_heads=4, head_dim=256, rotary_dim=64,
                          hidden_size=5120, intermediate_size=17408, num_heads=24, vocab_size=151936,
                          max_position_embeddings=1 << 30)
    bf16 = torch.bfloat16
    one = 2 * 4 * 256 * 2  # K and V of a token in one layer, bf16
    assert prefill_copy_bytes_per_token(cfg, "bf16", bf16, (9, 0)) == one
    assert prefill_copy_bytes_per_token(cfg, "bf16", torch.float16, (7, 5)) == one + 2 * 24 * 256 * 2
    assert prefill_copy_bytes_per_token(cfg, "int4", bf16, (8, 6)) == 0
    assert prefill_copy_bytes_per_token(cfg, "int8", torch.float16, (7, 5)) == 0
    assert prefill_copy_bytes_per_token(cfg, "int8", bf16, (9, 0), block_size=24) == one
    budget, weights = 22 * 2**30, 14 * 2**30
    gpu, cpu = (plan_max_context(cfg, budget, "bf16", weights, bf16, capability=c) for c in ((9, 0), None))
    kv = bytes_per_token("bf16", 16, 4, 256, bf16) + 64 * 4
    assert gpu < cpu and abs(gpu * (kv + one) - cpu * kv) <= 64 * (kv + one)  # the same bytes, shared out
    assert plan_max_context(cfg, budget, "int4", weights, bf16) == plan_max_context(cfg, budget, "int4", weights,
                                                                                    bf16, capability=None)
    monkeypatch.setattr(kv_quant, "PREFILL_MODE", "gather")
    assert prefill_copy_bytes_per_token(cfg, "int4", bf16, (9, 0)) == one
    assert plan_max_context(cfg, budget, "int4", weights, bf16) < plan_max_context(cfg, budget, "int4", weights,
                                                                                   bf16, capability=None)


@pytest.fixture(scope="module")
def llm_int8():
    from ninfer.llm import LLM

    return LLM(kv_cache="int8", max_context=512, progress=False)


def test_llm_with_int8_kv_generates_like_bf16(llm_int8):
    from ninfer.config.sampling import SamplingParams
    from ninfer.quant.evaluate import kv_format

    assert llm_int8.info()["kv_cache"] == "int8"
    assert llm_int8.ops.explain()["paged_attention"] == "reference:reference.paged_attention_int8"
    assert llm_int8.runner.kv.k[0].data.dtype == torch.int8
    params = SamplingParams(temperature=0, max_tokens=8)
    prompt = llm_int8.render_chat([{"role": "user", "content": "What is the capital of France?"}])
    quant = llm_int8.generate(prompt, params).token_ids
    with kv_format(llm_int8, "bf16"):
        assert llm_int8.runner.kv.k[0].dtype == torch.float32
        plain = llm_int8.generate(prompt, params).token_ids
    assert llm_int8.runner.kv.k[0].data.dtype == torch.int8  # restored
    assert quant == plain


def test_bad_kv_cache_is_one_sentence():
    from ninfer.llm import LLM

    with pytest.raises(NinferError, match="kv_cache"):
        LLM(kv_cache="fp3", progress=False)


def test_max_context_auto_uses_the_planner(llm_int8):
    from ninfer.models import ARCHITECTURES
    from ninfer.quant.capacity import auto_max_context, workspace_bytes

    cfg = llm_int8.config
    arch = ARCHITECTURES[cfg.architecture]
    # what the loaded model really holds (the tied lm_head shares the embedding table)
    held = {id(t): t.numel() * t.element_size() for t in _tensors(llm_int8.model)}
    per_tok = bytes_per_token("int8", cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, torch.float32) + cfg.rotary_dim * 4
    budget = sum(held.values()) + workspace_bytes(cfg, torch.float32) + 1000 * per_tok
    small = auto_max_context(llm_int8.checkpoint, cfg, arch, torch.device("cpu"), torch.float32, "int8", budget=budget)
    assert 1000 - 128 <= small <= 1000
    big = auto_max_context(llm_int8.checkpoint, cfg, arch, torch.device("cpu"), torch.float32, "int8",
                           budget=64 * 2**30)
    assert big == cfg.max_position_embeddings


@pytest.mark.parametrize("tied", [True, False])
def test_max_context_auto_counts_a_quantised_lm_head(tied, tmp_path):
    """--max-context auto with --lm-head int8: the planner counts what the loaded model really holds. SmolLM2 is
    tied (the int8 lm_head comes on top of the dense embedding); the tiny Llama is not (it replaces the dense one,
    ~190 bytes a row less: ~700 tokens of this budget at vocabulary 1024)."""
    from ninfer.llm import LLM
    from ninfer.models import ARCHITECTURES
    from ninfer.quant.capacity import auto_max_context, workspace_bytes
    from ninfer.quant.layout import QuantWeight
    from ninfer_testing import make_tiny_checkpoint

    if not tied:
        make_tiny_checkpoint("llama", str(tmp_path), vocab_size=1024, max_position_embeddings=4096)
    llm = LLM(model=None if tied else str(tmp_path), kv_cache="int8", max_context=64, progress=False,
              quantize_lm_head="int8")
    assert isinstance(llm.model.lm_head.weight, QuantWeight) and llm.config.tie_word_embeddings == tied
    cfg = llm.config
    arch = ARCHITECTURES[cfg.architecture]
    held = {id(t): t.numel() * t.element_size() for t in _tensors(llm.model)}
    per_tok = bytes_per_token("int8", cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, torch.float32) + cfg.rotary_dim * 4
    budget = sum(held.values()) + workspace_bytes(cfg, torch.float32) + 1000 * per_tok
    kw = dict(budget=budget)
    planned = auto_max_context(llm.checkpoint, cfg, arch, torch.device("cpu"), torch.float32, "int8", lm_head="int8",
                               **kw)
    assert 1000 - 128 <= planned <= 1000
    dense = auto_max_context(llm.checkpoint, cfg, arch, torch.device("cpu"), torch.float32, "int8", **kw)
    assert (dense > 1000) if tied else (dense < 1000 - 128)  # the dense count over- / under-plans


def _tensors(obj, seen=None):
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        yield obj
        return
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return
    seen.add(id(obj))
    for name, child in vars(obj).items():
        if name not in ("ops", "cfg"):
            for c in child if isinstance(child, list) else [child]:
                yield from _tensors(c, seen)
