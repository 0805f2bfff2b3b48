"""MTP drafting: the model's own multi-token-prediction head (``mtp.*`` in Qwen3.5 / Qwen3-Next).

At position t the head reads the target's hidden state h_t and the embedding of the next token
x_{t+1}: fc([norm_e(embed(x_{t+1})); norm_h(h_t)]) -> one full-attention decoder layer with its own
KV cache -> norm -> the target's lm_head, predicting x_{t+2}. Chaining feeds the head's own output
back as h for k > 1 (``mtp:3``). ``hidden=post`` (default) feeds the target's hidden state after the
final norm, as vLLM does; ``hidden=pre`` feeds the residual stream before it.
"""

from __future__ import annotations

import dataclasses

import torch

from ninfer.drafting import DraftContext, Drafter, DraftSampler, Proposal
from ninfer.engine.context import ForwardContext
from ninfer.errors import NinferError
from ninfer.kv.paged import PagedKVCache, SequenceKV
from ninfer.layers.linear import Linear
from ninfer.layers.norm import RMSNorm
from ninfer.models.decoder import CausalLM, DecoderBlock


class MTPHead:
    """The ``mtp.*`` weights as a model object the loader can fill."""

    def __init__(self, cfg, ops):
        H = cfg.hidden_size
        self.cfg = dataclasses.replace(cfg, num_layers=1, layer_types=["full_attention"])
        self.ops = ops
        zc = cfg.norm_zero_centered
        self.fc = Linear(ops, 2 * H, H)
        self.pre_fc_norm_embedding = RMSNorm(ops, H, cfg.rms_norm_eps, zc)
        self.pre_fc_norm_hidden = RMSNorm(ops, H, cfg.rms_norm_eps, zc)
        self.layers = [DecoderBlock(self.cfg, ops, 0, 0)]
        self.norm = RMSNorm(ops, H, cfg.rms_norm_eps, zc)

    def weight_sources(self) -> dict[str, list[str]]:
        src = {"fc.weight": ["mtp.fc.weight"], "norm.weight": ["mtp.norm.weight"],
               "pre_fc_norm_embedding.weight": ["mtp.pre_fc_norm_embedding.weight"],
               "pre_fc_norm_hidden.weight": ["mtp.pre_fc_norm_hidden.weight"]}
        src.update({f"layers.0.{k}": v for k, v in self.layers[0].weight_sources("mtp.layers.0").items()})
        return src

    owner, set_weight = CausalLM.owner, CausalLM.set_weight


def _mtp_names(name: str) -> list[str]:
    # multimodal Qwen3.5 checkpoints keep the text model under model.language_model, mtp.* at top level
    return [name, f"model.{name}", f"model.language_model.{name}"]


class MTPDrafter(Drafter):
    """``mtp[:k][,hidden=post|pre]``: chain k tokens (default 3) from the model's MTP head."""

    name = "mtp"
    uses_hidden = True

    def __init__(self, llm=None, arg=None, **options):
        super().__init__(llm, arg, **options)
        self.k = self.int_arg(3)
        self.hidden_kind = options.get("hidden", "post")
        if self.hidden_kind not in ("post", "pre") or set(options) - {"hidden"}:
            raise NinferError("mtp takes one option, hidden=post or hidden=pre (the target hidden state "
                              "after or before the final norm).")
        if llm is None:
            raise NinferError("The mtp drafter needs a loaded model; use LLM(model, draft='mtp').")
        self.target = llm.model
        self.head = MTPHead(llm.config, llm.ops)
        self._load(llm)
        cfg, runner = llm.config, llm.runner
        bs = 64
        # the head's KV cache uses the target's KV format: the ops were resolved for it
        self.kv = PagedKVCache(1, (llm.max_context + bs - 1) // bs, bs, cfg.num_kv_heads, cfg.head_dim,
                               llm.dtype, llm.device, getattr(llm, "kv_cache", "bf16"))
        self.seq = SequenceKV(self.kv, llm.max_context, llm.device)
        self.cos_sin = runner.cos_sin
        self.device = llm.device
        self.picker = None

    def _load(self, llm) -> None:
        """Take the head's tensors from the model's kept ``mtp.*`` weights, else from the checkpoint."""
        kept = getattr(llm.model, "extra_weights", {}) or {}
        names = set(llm.checkpoint.tensor_names())

        def get(canonical: str) -> torch.Tensor:
            for n in _mtp_names(canonical):
                if n in kept:
                    return kept[n]
                if n in names:
                    return llm.checkpoint.get(n)
            raise NinferError(f"{llm.model_name} has no complete MTP head ({canonical} is missing); use "
                              "the lookup drafter (--draft lookup) or a DFlash draft model instead.")

        get("mtp.fc.weight")
        for path, canon in self.head.weight_sources().items():
            parts = [get(c) for c in canon]
            t = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
            self.head.set_weight(path, t.to(device=llm.device, dtype=llm.dtype).contiguous())

    def reset(self) -> None:
        self.seq.free()
        self.picker = None

    def _step(self, h: torch.Tensor, next_ids: list[int], start: int) -> torch.Tensor:
        """Run the head over positions start.. ; h: [n, H] target hidden, next_ids: n tokens -> [n, H]."""
        hd = self.head
        ids = torch.tensor(next_ids, dtype=torch.int64).to(self.device)
        e = hd.ops.embedding(ids, self.target.embed_tokens)  # [n, H]
        x = hd.fc(torch.cat([hd.pre_fc_norm_embedding(e), hd.pre_fc_norm_hidden(h.to(e.dtype))], dim=-1))
        n = len(next_ids)
        self.seq.ensure(start + n)
        positions = torch.arange(start, start + n, dtype=torch.int64)
        ctx = ForwardContext(positions=positions.to(self.device), slots=self.seq.slots(positions).to(self.device),
                             block_table=self.seq.block_table, kv=self.kv, cos_sin=self.cos_sin, phase="decode")
        return hd.layers[0](x, ctx)  # [n, H] before the head's final norm

    @torch.inference_mode()
    def observe(self, context: DraftContext) -> int:
        """Prefill the head's cache from the prompt: position t needs token t + 1, so the prompt's last
        position waits for the first propose."""
        h = context.hidden if self.hidden_kind == "post" else context.hidden_pre_norm
        s = context.hidden_start
        n = min(h.shape[0], len(context.token_ids) - 1 - s)
        if n <= 0:
            return 0
        self._step(h[:n], context.token_ids[s + 1: s + 1 + n], s)
        return n

    @torch.inference_mode()
    def propose(self, context: DraftContext) -> Proposal:
        h = context.hidden if self.hidden_kind == "post" else context.hidden_pre_norm
        seq, s = context.token_ids, context.hidden_start
        if h is None or h.shape[0] != len(seq) - 1 - s:
            raise NinferError("The mtp drafter got no target hidden states; run it through LLM(draft='mtp').")
        k = min(self.k, context.max_tokens)
        if k <= 0:
            return Proposal([], None, self.name)
        # cache entries past s were speculative (chained) or are stale: recompute from s on
        out = self._step(h, seq[s + 1:], s)[-1:]  # pairs (h_t, x_{t+1}) for t = s .. L-2
        if self.picker is None or self.picker.params is not context.params:
            self.picker = DraftSampler(context.params, self.device)
        tokens: list[int] = []
        qs: list = []
        pos = len(seq) - 1
        while True:
            normed = self.head.norm(out)
            t, q = self.picker.pick(self.target.logits(normed)[0])
            tokens.append(t)
            qs.append(q)
            if len(tokens) == k:
                return Proposal(tokens, qs if q is not None else None, self.name)
            chained = normed if self.hidden_kind == "post" else out
            out = self._step(chained, [tokens[-1]], pos)
            pos += 1
