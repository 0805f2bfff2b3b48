"""The one decoder: embed -> [norm -> mixer -> norm -> MLP] x N -> norm -> lm_head.

The mixer of each layer is chosen by ``config.layer_types`` from ``layers.MIXERS``, so a hybrid
model adds a mixer, not a second model.
"""

from __future__ import annotations

import torch

from ..layers import MIXERS
from ..layers import attention as _attention  # noqa: F401  (registers "full_attention")
from ..layers.linear import Linear
from ..layers.mlp import SwiGLU
from ..layers.norm import RMSNorm


class DecoderBlock:
    def __init__(self, cfg, ops, layer_idx: int, kv_idx: int):
        t = cfg.layer_types[layer_idx]
        if t not in MIXERS:
            from ..errors import NinferError

            raise NinferError(f"Layer type {t!r} has no mixer in this ninfer; supported: {', '.join(sorted(MIXERS))}.")
        self.input_norm = RMSNorm(ops, cfg.hidden_size, cfg.rms_norm_eps, cfg.norm_zero_centered)
        self.mixer = MIXERS[t](cfg, ops, layer_idx, kv_idx)
        self.post_norm = RMSNorm(ops, cfg.hidden_size, cfg.rms_norm_eps, cfg.norm_zero_centered)
        self.mlp = SwiGLU(ops, cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias)
        self.fixed_planned = False

    def __call__(self, x: torch.Tensor, ctx) -> torch.Tensor:
        h, mlp_out = self.deferred(x, None, ctx)
        return h + mlp_out

    def deferred(self, x: torch.Tensor, pending: torch.Tensor | None, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """The block with its last residual add left to the caller: (h, mlp_out), the block's output being
        h + mlp_out. ``pending``: the previous block's mlp_out, not yet added to x; this block's input norm adds
        it (add_rms_norm: one kernel instead of an add and a norm)."""
        if not self.fixed_planned and x.shape[0] == 1:  # at the first one-token step: weights repacked by then
            self.plan_fixed(x)
        if pending is None:
            a = self.input_norm(x)
        else:
            a, x = self.input_norm.add_and_norm(pending, x)
        normed, h = self.post_norm.add_and_norm(self.mixer(a, ctx), x)  # h = x + mixer out
        return h, self.mlp(normed)

    def plan_fixed(self, x: torch.Tensor) -> None:
        """Each norm also writes its row in the fixed-point form of the int4 one-token GEMV (ninfer.quant.fixed)
        where a weight that reads it takes that form: the mixer's input projections, the MLP's gate_up; the MLP's
        SwiGLU GEMV its output, where gate_up takes the form and down does too; and the mixer's last op before its
        output projection (the attention gate, the Gated DeltaNet recurrence) its output, where that weight takes it."""
        from ..quant.fixed import serves, serves_output

        reads = (self.mixer.input_weights() if hasattr(self.mixer, "input_weights") else
                 [v.weight for v in vars(self.mixer).values() if isinstance(v, Linear) and v.in_features == x.shape[-1]])
        self.input_norm.fixed = x.is_cuda and any(serves(w) for w in reads)
        self.post_norm.fixed = x.is_cuda and serves(self.mlp.gate_up.weight)
        self.mlp.fixed = self.post_norm.fixed and serves(self.mlp.down.weight)
        if hasattr(self.mixer, "fixed_out"):
            self.mixer.fixed_out = x.is_cuda and serves_output(self.mixer.output_weight())
        self.fixed_planned = True

    def weight_sources(self, prefix: str) -> dict[str, list[str]]:
        src = {"input_norm.weight": [f"{prefix}.input_layernorm.weight"],
               "post_norm.weight": [f"{prefix}.post_attention_layernorm.weight"]}
        src.update({f"mixer.{k}": v for k, v in self.mixer.weight_sources(prefix).items()})
        src.update({f"mlp.{k}": v for k, v in self.mlp.weight_sources(f"{prefix}.mlp").items()})
        return src


class CausalLM:
    def __init__(self, cfg, ops):
        self.cfg, self.ops = cfg, ops
        self.embed_tokens: torch.Tensor | None = None  # [V, H]
        attn = cfg.attention_layers
        self.kv_index = {layer: i for i, layer in enumerate(attn)}
        self.layers = [DecoderBlock(cfg, ops, i, self.kv_index.get(i, -1)) for i in range(cfg.num_layers)]
        self.norm = RMSNorm(ops, cfg.hidden_size, cfg.rms_norm_eps, cfg.norm_zero_centered)
        self.lm_head = Linear(ops, cfg.hidden_size, cfg.vocab_size)
        self.extra_weights: dict[str, torch.Tensor] = {}  # e.g. mtp.* kept for the MTP drafter
        self.fixed_planned = False

    def forward(self, ids: torch.Tensor, ctx) -> torch.Tensor:
        """ids: [T] int64 -> final hidden states [T, H] (after the final norm)."""
        x = self.ops.embedding(ids, self.embed_tokens)
        if not self.fixed_planned and ids.numel() == 1:  # as DecoderBlock.plan_fixed: the final norm for lm_head
            from ..quant import gpu
            from ..quant.fixed import serves

            self.norm.fixed = x.is_cuda and gpu.QMV1F_HEAD and serves(self.lm_head.weight)
            self.fixed_planned = True
        pending = None  # the last block's MLP output, added to x by the next norm (fused)
        for layer in self.layers:
            if isinstance(layer, DecoderBlock):
                x, pending = layer.deferred(x, pending, ctx)
            else:  # a wrapped block (engine.speculative.LayerTaps) takes and returns the whole residual stream
                x = layer(x if pending is None else x + pending, ctx)
                pending = None
        if pending is None:
            ctx.hidden_pre_norm = x
            return self.norm(x)
        normed, ctx.hidden_pre_norm = self.norm.add_and_norm(pending, x)
        return normed

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [T, H] -> float32 logits [T, V]."""
        return self.lm_head(hidden).float()

    def weight_sources(self) -> dict[str, list[str]]:
        """Our parameter path -> canonical checkpoint names concatenated (on dim 0) to make it."""
        src = {"embed_tokens": ["model.embed_tokens.weight"], "norm.weight": ["model.norm.weight"]}
        for i, layer in enumerate(self.layers):
            src.update({f"layers.{i}.{k}": v for k, v in layer.weight_sources(f"model.layers.{i}").items()})
        src["lm_head.weight"] = ["model.embed_tokens.weight"] if self.cfg.tie_word_embeddings else ["lm_head.weight"]
        return src

    def owner(self, path: str):
        """The object that holds the parameter at ``path`` ("layers.3.mlp.gate_up.weight" -> that Linear)."""
        obj = self
        for p in path.split(".")[:-1]:
            obj = obj[int(p)] if p.isdigit() else getattr(obj, p)
        return obj

    def set_weight(self, path: str, tensor: torch.Tensor) -> None:
        setattr(self.owner(path), path.rsplit(".", 1)[-1], tensor)
