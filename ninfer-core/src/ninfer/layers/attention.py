"""Full attention over the paged KV cache: prefill, decode and verify are one code path.

Options cover the Llama/Qwen family: q/k/v biases (Qwen2), per-head q/k RMSNorm (Qwen3, Qwen3.5),
partial rotary and a sigmoid output gate carried in q_proj (Qwen3.5).
"""

from __future__ import annotations

import torch

from ..quant.fixed import carried
from . import register_mixer
from .linear import Linear
from .norm import RMSNorm


@register_mixer("full_attention")
class Attention:
    def __init__(self, cfg, ops, layer_idx: int, kv_idx: int):
        self.cfg, self.ops, self.kv_idx = cfg, ops, kv_idx
        self.hq, self.hk, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.gated = cfg.attn_output_gate
        q_out = self.hq * self.d * (2 if self.gated else 1)
        self.qkv = Linear(ops, cfg.hidden_size, q_out + 2 * self.hk * self.d, bias=cfg.attention_bias,
                          parts=(q_out, self.hk * self.d, self.hk * self.d))
        self.o = Linear(ops, self.hq * self.d, cfg.hidden_size, bias=cfg.o_bias)
        self.q_norm = RMSNorm(ops, self.d, cfg.rms_norm_eps, cfg.norm_zero_centered) if cfg.qk_norm else None
        self.k_norm = RMSNorm(ops, self.d, cfg.rms_norm_eps, cfg.norm_zero_centered) if cfg.qk_norm else None
        self.scale = self.d ** -0.5
        self.fixed_out = False  # the output gate also writes o's fixed-point input form (DecoderBlock.plan_fixed)

    def _gate_in_attention(self) -> bool:
        """Whether the output gate [T, hq, d] rides in attention's last kernel (``attention_gated``): where the
        backend that serves ``paged_attention`` serves it too. Elsewhere its reference form would replace that
        backend's attention kernels, so the gate follows them as ``sigmoid_mul``."""
        impls = getattr(self.ops, "impls", {})
        g, a = impls.get("attention_gated"), impls.get("paged_attention")
        return g is not None and a is not None and g.backend == a.backend

    def output_weight(self):
        """The weight that reads the mixer's output (DecoderBlock.plan_fixed)."""
        return self.o.weight

    def weight_sources(self, prefix: str) -> dict[str, list[str]]:
        p = f"{prefix}.self_attn"
        src = {"qkv.weight": [f"{p}.q_proj.weight", f"{p}.k_proj.weight", f"{p}.v_proj.weight"],
               "o.weight": [f"{p}.o_proj.weight"]}
        if self.cfg.attention_bias:
            src["qkv.bias"] = [f"{p}.q_proj.bias", f"{p}.k_proj.bias", f"{p}.v_proj.bias"]
        if self.cfg.o_bias:
            src["o.bias"] = [f"{p}.o_proj.bias"]
        if self.q_norm is not None:
            src["q_norm.weight"] = [f"{p}.q_norm.weight"]
            src["k_norm.weight"] = [f"{p}.k_norm.weight"]
        return src

    def __call__(self, x: torch.Tensor, ctx) -> torch.Tensor:
        T = x.shape[0]
        qkv = self.qkv(x)
        q_out = self.hq * self.d * (2 if self.gated else 1)
        q, k, v = qkv.split([q_out, self.hk * self.d, self.hk * self.d], dim=-1)
        gate = None
        if self.gated:  # per head: [query(d) | gate(d)]; gate stays a [T, hq, d] view
            q, gate = q.view(T, self.hq, 2 * self.d).chunk(2, dim=-1)
        q = q.reshape(T, self.hq, self.d)
        k = k.reshape(T, self.hk, self.d)
        v = v.reshape(T, self.hk, self.d)
        k_cache, v_cache = ctx.kv.k[self.kv_idx], ctx.kv.v[self.kv_idx]
        if isinstance(k_cache, torch.Tensor):  # caches in the model dtype: q/k norm, RoPE, cache write in one op
            qn, kn = (self.q_norm.weight, self.k_norm.weight) if self.q_norm is not None else (None, None)
            q = self.ops.rope_write_kv(q, k, v, ctx.positions, ctx.cos_sin, k_cache, v_cache, ctx.slots, qn, kn,
                                       self.cfg.rms_norm_eps, self.cfg.norm_zero_centered)
        else:  # a quantised KV pool (ninfer.quant): its write_kv quantises
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = self.ops.rope(q, k, ctx.positions, ctx.cos_sin)
            self.ops.write_kv(k, v, k_cache, v_cache, ctx.slots)
        fixed = self.fixed_out and T == 1  # o's fixed-point form with the gated row, where planned
        if gate is not None and isinstance(k_cache, torch.Tensor) and self._gate_in_attention():
            o = self.ops.attention_gated(q, k_cache, v_cache, ctx.block_table, ctx.positions, self.scale, gate,
                                         fixed)
        else:
            o = self.ops.paged_attention(q, k_cache, v_cache, ctx.block_table, ctx.positions, self.scale)
            if gate is not None:
                o = self.ops.sigmoid_mul(o, gate, fixed=fixed)
        return self.o(carried(o, o.reshape(T, self.hq * self.d)))
