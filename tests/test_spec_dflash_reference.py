"""The DFlash / DFlash2 draft pass against an independent reference: the target's hidden states come
from transformers (``output_hidden_states``, layer l is ``hidden_states[l + 1]``) and the draft
network is recomputed in one batch from transformers' Qwen3 modules (RMSNorm, MLP, rotary embedding)
and PyTorch's scaled_dot_product_attention, following z-lab's formulation: context K/V from
``hidden_norm(fc(target hidden))``, queries from the block [last, mask...], non-causal attention
over context + block (sliding window where configured)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from test_spec_support import hidden_probe, write_dflash
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import (
    Qwen3MLP,
    Qwen3RMSNorm,
    Qwen3RotaryEmbedding,
    apply_rotary_pos_emb,
)

from ninfer import LLM
from ninfer.drafting import build_drafter
from ninfer.engine.speculative import _TargetHidden
from ninfer_testing import make_tiny_checkpoint

SEQ = [5, 17, 42, 99, 123, 7, 5, 17, 42, 61, 250, 88, 5]


def _norm(w, eps):
    n = Qwen3RMSNorm(w.shape[0], eps=eps)
    n.weight.data.copy_(w)
    return n


def reference_block(cfg: dict, w: dict, target_hidden: torch.Tensor, noise: torch.Tensor):
    """z-lab's draft forward, batched: target_hidden [n, T*H] (positions 0..n-1), noise [B, H]
    (positions n..n+B-1) -> final hidden [B, H]."""
    eps, H = cfg["rms_norm_eps"], cfg["hidden_size"]
    hq, hk, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    qcfg = Qwen3Config(hidden_size=H, intermediate_size=cfg["intermediate_size"], num_attention_heads=hq,
                       num_key_value_heads=hk, head_dim=d, rope_theta=cfg["rope_theta"],
                       max_position_embeddings=512)
    n, B = target_hidden.shape[0], noise.shape[0]
    ctx = _norm(w["hidden_norm.weight"], eps)(target_hidden @ w["fc.weight"].T)  # [n, H]
    pos = torch.arange(n + B)[None]
    cos, sin = Qwen3RotaryEmbedding(qcfg)(noise[None], pos)
    types = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
    h = noise
    dcfg = cfg["dflash_config"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}"

        def conv(x, name, half, dyn=None, p=p):
            """Grouped dynamic causal conv (DFlash2): per channel group, taps of the past tokens."""
            K, G = dcfg["conv_kernel_size"], dcfg["conv_group_size"]
            if dyn is None:
                dyn = (x @ w[f"{p}.{name}.kernel_projection.weight"].T).view(B, 2, K, H // G)
            out = torch.zeros_like(x)
            for o in range(K):
                past = torch.cat([torch.zeros(o, H), x[: B - o]])  # token t reads token t - o
                scale = w[f"{p}.{name}.base_kernel"][half, o] + dyn[:, half, o].repeat_interleave(G, dim=-1)
                out = out + scale * past
            return out, dyn

        x = _norm(w[f"{p}.input_layernorm.weight"], eps)(h)
        if "layers.0.attention_conv.base_kernel" in w:
            x, dyn = conv(x, "attention_conv", 0)
        q = _norm(w[f"{p}.self_attn.q_norm.weight"], eps)((x @ w[f"{p}.self_attn.q_proj.weight"].T).view(B, hq, d))
        kv_in = torch.cat([ctx, x])  # context keys/values come from the projected target states
        k = _norm(w[f"{p}.self_attn.k_norm.weight"], eps)((kv_in @ w[f"{p}.self_attn.k_proj.weight"].T).view(n + B, hk, d))
        v = (kv_in @ w[f"{p}.self_attn.v_proj.weight"].T).view(n + B, hk, d)
        q, k = q.transpose(0, 1)[None], k.transpose(0, 1)[None]  # [1, heads, T, d]
        q = apply_rotary_pos_emb(q, q, cos[:, n:], sin[:, n:])[0]  # queries at the block's positions
        k = apply_rotary_pos_emb(k, k, cos, sin)[1]  # keys at context + block positions
        mask = None
        if types[i] == "sliding_attention":
            qp, kp = torch.arange(n, n + B)[:, None], torch.arange(n + B)[None]
            mask = (qp - kp).abs() < cfg["sliding_window"]
        o = F.scaled_dot_product_attention(q, k, v.transpose(0, 1)[None], attn_mask=mask, enable_gqa=True)
        o = o[0].transpose(0, 1).reshape(B, hq * d) @ w[f"{p}.self_attn.o_proj.weight"].T
        if "layers.0.attention_conv.base_kernel" in w:
            o, _ = conv(o, "attention_conv", 1, dyn)
        h = h + o
        x = _norm(w[f"{p}.post_attention_layernorm.weight"], eps)(h)
        mlp = Qwen3MLP(qcfg)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            getattr(mlp, proj).weight.data.copy_(w[f"{p}.mlp.{proj}.weight"])
        if "layers.0.attention_conv.base_kernel" in w:
            x, dyn = conv(x, "mlp_conv", 0)
            h = h + conv(mlp(x), "mlp_conv", 1, dyn)[0]
        else:
            h = h + mlp(x)
    return _norm(w["norm.weight"], eps)(h)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("qwen3") / "model")
    hf = make_tiny_checkpoint("qwen3", path, seed=21)
    return path, hf


@pytest.mark.parametrize("v2", [False, True], ids=["dflash", "dflash2"])
@torch.no_grad()
def test_draft_pass_matches_the_reference(target, v2):
    import json

    path, hf = target
    dpath = write_dflash(f"{path}/d{int(v2)}", path, [0, 1] if v2 else [0, 2], v2=v2, seed=22)
    cfg = json.load(open(f"{dpath}/config.json"))
    w = load_file(f"{dpath}/model.safetensors")
    llm = LLM(path, progress=False, max_context=128)
    llm.runner.prefill_chunk = 5  # a prompt of several chunks: the taps are gathered chunk by chunk
    drafter = build_drafter(f"dflash:{dpath}", llm)
    m = drafter.model

    # target hidden states: ours through the layer taps, transformers' through output_hidden_states
    th = _TargetHidden(llm.runner, hidden_probe(drafter))  # every state, none observed
    th.prefill(SEQ[:-1])
    hs = hf(torch.tensor([SEQ[:-1]]), output_hidden_states=True).hidden_states
    ids = cfg["dflash_config"]["target_layer_ids"]
    ref_feats = torch.cat([hs[i + 1][0] for i in ids], dim=-1)
    ours = torch.cat([th.layers[i] for i in ids], dim=-1)
    torch.testing.assert_close(ours, ref_feats, rtol=1e-4, atol=1e-4)

    block = [SEQ[-1]] + [cfg["dflash_config"]["mask_token_id"]] * (cfg["dflash_config"]["block_size"] - 1)
    noise = hf.model.embed_tokens.weight[torch.tensor(block)]
    ref = reference_block(cfg, w, ref_feats, noise)
    m.add_context(ours, 0)
    got = m.block_hidden(noise.clone())
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)

    # and the proposal: argmax of the shared lm_head (DFlash) or the selector's path (DFlash2)
    ctx_layers = th.layers
    from ninfer.drafting import DraftContext

    drafter.reset()
    prop = drafter.propose(DraftContext(SEQ, len(SEQ), len(block) - 1, 0, th.post, th.pre, ctx_layers))
    logits = hf.lm_head(ref[1:]) * cfg["dflash_config"].get("output_multiplier", 1.0)
    cap = cfg["dflash_config"].get("final_logit_softcapping")
    if cap:
        logits = torch.tanh(logits / cap) * cap
    if not v2:
        assert prop.tokens == logits.argmax(-1).tolist()
    else:  # the selector: unary top-k logits plus a predecessor x hidden x successor bilinear score
        top = cfg["dflash_config"]["selector_top_k"]
        unary, cand = torch.topk(logits, top, dim=-1)
        hp = ref[1:] @ w["candidate_selector.hidden_projection.weight"].T
        prev, path_ = SEQ[-1], []
        for i in range(len(block) - 1):
            score = unary[i] + (w["candidate_selector.predecessor_codebook"][prev] * hp[i]) @ \
                w["candidate_selector.successor_codebook"][cand[i]].T
            prev = int(cand[i, score.argmax()])
            path_.append(prev)
        assert prop.tokens == path_
