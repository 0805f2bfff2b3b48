"""The DFlash / DFlash2 draft network in z-lab's checkpoint format (``DFlashDraftModel``,
``DFlash2DraftModel``), written over ninfer's ops.

Context: the target's hidden states from ``target_layer_ids`` are concatenated, projected by ``fc``
and normed (``hidden_norm``); every draft layer turns them into keys/values of the context (KV
injection), cached per position. Draft: one non-causal pass over [last token, mask x (B-1)]
(embedded with the target's table), whose queries attend to context + block; the target's lm_head
reads positions 1..B-1. DFlash2 adds a grouped dynamic causal convolution around attention and MLP
and a candidate selector that picks a path through each position's top-k.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ninfer.errors import NinferError


def _cfg(config: dict, key: str, default=None):
    return (config.get("dflash_config") or {}).get(key, config.get(key, default))


class DFlashModel:
    def __init__(self, config: dict, weights: dict[str, torch.Tensor], ops, max_positions: int, device, dtype):
        self.c, self.w, self.ops = config, weights, ops
        self.H = config["hidden_size"]
        self.hq = config["num_attention_heads"]
        self.hk = config.get("num_key_value_heads") or self.hq
        self.d = config.get("head_dim") or self.H // self.hq
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.n_layers = config["num_hidden_layers"]
        self.target_layer_ids = list(_cfg(config, "target_layer_ids") or [])
        if not self.target_layer_ids:
            raise NinferError("The DFlash config has no dflash_config.target_layer_ids; use a z-lab DFlash checkpoint.")
        self.block_size = int(_cfg(config, "block_size", 16))
        self.mask_token_id = _cfg(config, "mask_token_id")
        if self.mask_token_id is None:
            raise NinferError("The DFlash config has no mask_token_id; use a z-lab DFlash checkpoint.")
        self.embed_scale = float(_cfg(config, "input_embedding_scale", 1.0))
        self.out_mult = float(_cfg(config, "output_multiplier", 1.0))
        self.softcap = float(_cfg(config, "final_logit_softcapping", 0.0) or 0.0)
        self.causal = bool(config.get("is_causal", False))
        types = config.get("layer_types") or ["full_attention"] * self.n_layers
        win = config.get("sliding_window")
        self.windows = [win if t == "sliding_attention" else None for t in types]
        self.v2 = "layers.0.attention_conv.base_kernel" in weights
        if self.v2:
            self.conv_group = int(_cfg(config, "conv_group_size"))
            self.conv_k = int(_cfg(config, "conv_kernel_size"))
        theta = float(config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta", 10000.0))
        from ninfer.reference.ops import rope_cos_sin

        self.cos_sin = rope_cos_sin(max_positions, self.d, theta, None, device)
        # context keys/values per layer: [positions, kv_heads, head_dim]
        self.k_ctx = [torch.zeros(max_positions, self.hk, self.d, dtype=dtype, device=device) for _ in range(self.n_layers)]
        self.v_ctx = [torch.zeros_like(k) for k in self.k_ctx]
        self.n_ctx = 0

    # -- pieces --------------------------------------------------------------------------
    def lin(self, x, name):
        return self.ops.linear(x, self.w[f"{name}.weight"], self.w.get(f"{name}.bias"))

    def norm(self, x, name):
        return self.ops.rms_norm(x, self.w[f"{name}.weight"], self.eps, False)

    def _kv(self, x, i, positions):
        """Keys/values of rows x [T, H] in layer i: k [T, hk, d] (normed, rotated), v [T, hk, d]."""
        p = f"layers.{i}.self_attn"
        T = x.shape[0]
        k = self.norm(self.lin(x, f"{p}.k_proj").view(T, self.hk, self.d), f"{p}.k_norm")
        v = self.lin(x, f"{p}.v_proj").view(T, self.hk, self.d)
        _, k = self.ops.rope(k[:, :1], k, positions, self.cos_sin)
        return k, v

    def _conv(self, x, dyn, base):
        """Grouped dynamic causal conv over the block: x [T, H], dyn [T, K, groups], base [K, H]."""
        T, H = x.shape
        groups = H // self.conv_group
        xb = x.view(T, groups, self.conv_group)
        out = torch.zeros_like(xb)
        for o in range(base.shape[0]):
            shifted = xb if o == 0 else F.pad(xb[:-o], (0, 0, 0, 0, o, 0))  # token t sees t - o
            out = out + base[o].view(groups, self.conv_group).to(x.dtype) * shifted + dyn[:, o, :, None] * shifted
        return out.view(T, H)

    def _conv_prepare(self, x, name):
        T = x.shape[0]
        dyn = self.lin(x, f"{name}.kernel_projection").view(T, 2, self.conv_k, -1)  # [T, 2, K, groups]
        base = self.w[f"{name}.base_kernel"]  # [2, K, H]
        return self._conv(x, dyn[:, 0], base[0]), dyn[:, 1]

    def _conv_finish(self, x, dyn, name):
        return self._conv(x, dyn, self.w[f"{name}.base_kernel"][1])

    # -- context -------------------------------------------------------------------------
    def add_context(self, features: torch.Tensor, start: int) -> None:
        """features: [n, len(target_layer_ids) * H] for positions start..start+n-1 (drops anything after)."""
        ctx = self.norm(self.lin(features, "fc"), "hidden_norm")  # [n, H]
        n = ctx.shape[0]
        positions = torch.arange(start, start + n, device=ctx.device)
        for i in range(self.n_layers):
            k, v = self._kv(ctx, i, positions)
            self.k_ctx[i][start: start + n] = k
            self.v_ctx[i][start: start + n] = v
        self.n_ctx = start + n

    # -- draft ---------------------------------------------------------------------------
    def block_hidden(self, embeds: torch.Tensor) -> torch.Tensor:
        """One pass over the block embeddings [B, H] at positions n_ctx..; -> final hidden [B, H]."""
        B, S = embeds.shape[0], self.n_ctx
        positions = torch.arange(S, S + B, device=embeds.device)
        key_pos = torch.arange(S + B, device=embeds.device)
        h = embeds
        for i in range(self.n_layers):
            p = f"layers.{i}"
            x = self.norm(h, f"{p}.input_layernorm")
            if self.v2:
                x, dyn = self._conv_prepare(x, f"{p}.attention_conv")
            q = self.norm(self.lin(x, f"{p}.self_attn.q_proj").view(B, self.hq, self.d), f"{p}.self_attn.q_norm")
            k, v = self._kv(x, i, positions)
            q, _ = self.ops.rope(q, k[:, :1], positions, self.cos_sin)
            # the block's keys/values go in the cache's scratch rows after the context (overwritten
            # by the next add_context), so attention reads one contiguous window without a copy
            self.k_ctx[i][S: S + B] = k
            self.v_ctx[i][S: S + B] = v
            win = self.windows[i]
            lo = max(0, S - win + 1) if win is not None else 0  # older keys are outside every query's window
            keys, vals = self.k_ctx[i][lo: S + B], self.v_ctx[i][lo: S + B]  # [L, hk, d]
            kp = key_pos[lo:]
            mask = None
            if self.causal or win is not None:
                visible = torch.ones(B, S + B - lo, dtype=torch.bool, device=h.device)
                if self.causal:
                    visible &= kp[None, :] <= positions[:, None]
                if win is not None:
                    gap = positions[:, None] - kp[None, :]
                    visible &= (gap < win) & (-gap < win)
                mask = visible[None]  # [1, B, L] broadcast over heads
            o = F.scaled_dot_product_attention(q.transpose(0, 1), keys.transpose(0, 1), vals.transpose(0, 1),
                                               attn_mask=mask, enable_gqa=True)  # [hq, B, d]
            o = o.transpose(0, 1).reshape(B, self.hq * self.d)
            o = self.lin(o, f"{p}.self_attn.o_proj")
            if self.v2:
                o = self._conv_finish(o, dyn, f"{p}.attention_conv")
            h = h + o
            x = self.norm(h, f"{p}.post_attention_layernorm")
            if self.v2:
                x, dyn = self._conv_prepare(x, f"{p}.mlp_conv")
            m = self.lin(F.silu(self.lin(x, f"{p}.mlp.gate_proj")) * self.lin(x, f"{p}.mlp.up_proj"), f"{p}.mlp.down_proj")
            if self.v2:
                m = self._conv_finish(m, dyn, f"{p}.mlp_conv")
            h = h + m
        return self.norm(h, "norm")

    def logits(self, hidden: torch.Tensor, lm_head) -> torch.Tensor:
        z = lm_head(hidden).float() * self.out_mult
        return torch.tanh(z / self.softcap) * self.softcap if self.softcap > 0 else z

    def select(self, hidden: torch.Tensor, logits: torch.Tensor, anchor: int, picker=None):
        """DFlash2's candidate selector: a path through each position's top-k candidates, scored by the
        unary logit plus a predecessor x hidden x successor bilinear term. Greedy without a picker;
        with a sampling picker each step draws from the request's distribution over the candidates'
        scores. -> (tokens, q rows over the vocabulary or None)."""
        top_k = int(_cfg(self.c, "selector_top_k"))
        unary, cand = torch.topk(logits, top_k, dim=-1)  # [P, k]
        hp = self.lin(hidden, "candidate_selector.hidden_projection").float()  # [P, r]
        pred_cb, succ_cb = self.w["candidate_selector.predecessor_codebook"], self.w["candidate_selector.successor_codebook"]
        prev, path, qs = anchor, [], []
        for pos in range(hidden.shape[0]):
            scores = unary[pos] + (pred_cb[prev].float() * hp[pos]) @ succ_cb[cand[pos]].float().T  # [k]
            if picker is None or picker.sampler is None:
                prev = int(cand[pos, int(scores.argmax())])
            else:  # scores live on the candidates: spread them over the vocabulary for q
                full = torch.full_like(logits[pos], float("-inf")).scatter(0, cand[pos], scores)
                prev, q = picker.pick(full)
                qs.append(q)
            path.append(prev)
        return path, (qs or None)
