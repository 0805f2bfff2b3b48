"""DFlash drafting: a z-lab block-diffusion draft model proposes a whole block in one pass.

``dflash[:PATH_OR_K][,path=DIR][,k=N]``: the draft checkpoint is a directory with config.json and
safetensors (e.g. z-lab/Qwen3-8B-DFlash-b16). Without a path, ``NINFER_DFLASH_MODEL`` or a
``dflash/`` directory inside the target model's directory is used. k caps the proposal (default:
block_size - 1).
"""

from __future__ import annotations

import os

import torch

from ninfer.drafting import DraftContext, Drafter, DraftSampler, Proposal
from ninfer.errors import NinferError

from .dflash_model import DFlashModel


def _find_path(llm, arg: str | None, options: dict) -> str:
    if options.get("path"):
        return options["path"]
    if arg and not arg.isdigit():
        return arg
    if os.environ.get("NINFER_DFLASH_MODEL"):
        return os.environ["NINFER_DFLASH_MODEL"]
    beside = os.path.join(llm.model_path, "dflash") if os.path.isdir(llm.model_path) else ""
    if beside and os.path.isdir(beside):
        return beside
    raise NinferError("dflash needs its draft checkpoint: --draft dflash:/path/to/draft (draft='dflash:/path/to/draft' "
                      "in Python), or set NINFER_DFLASH_MODEL.")


class DFlashDrafter(Drafter):
    name = "dflash"

    def __init__(self, llm=None, arg=None, **options):
        super().__init__(llm, arg, **options)
        if llm is None:
            raise NinferError("The dflash drafter needs a loaded model; use LLM(model, draft='dflash:PATH').")
        from ninfer.weights import open_checkpoint

        path = _find_path(llm, arg, options)
        ckpt = open_checkpoint(path)
        cfg = ckpt.config
        weights = {n: ckpt.get(n).to(device=llm.device, dtype=llm.dtype) for n in ckpt.tensor_names()}
        for n in list(weights):  # transformers' loader maps the selector codebooks to *.weight
            if n.startswith("candidate_selector.") and n.endswith("_codebook.weight"):
                weights[n[: -len(".weight")]] = weights.pop(n)
        tcfg = llm.config
        if cfg.get("hidden_size") != tcfg.hidden_size:
            raise NinferError(f"The DFlash model at {path} has hidden size {cfg.get('hidden_size')} but the target "
                              f"has {tcfg.hidden_size}; use the draft model made for {llm.model_name}.")
        self.model = DFlashModel(cfg, weights, llm.ops, llm.max_context + 1, llm.device, llm.dtype)
        m = self.model
        if "fc.weight" not in weights or weights["fc.weight"].shape[1] != len(m.target_layer_ids) * tcfg.hidden_size:
            raise NinferError(f"The DFlash model at {path} lacks fc.weight of width "
                              f"{len(m.target_layer_ids)} x hidden size; the checkpoint is incomplete.")
        if not 0 <= m.mask_token_id < tcfg.vocab_size:
            raise NinferError(f"The DFlash mask token {m.mask_token_id} is outside the target's vocabulary; "
                              "use the draft model made for this target.")
        self.target_layers = tuple(m.target_layer_ids)
        self.k = int(options.get("k") or (arg if arg and arg.isdigit() else m.block_size - 1))
        self.target = llm.model
        self.path = path
        self.picker = None

    def reset(self) -> None:
        self.model.n_ctx = 0
        self.picker = None

    @torch.inference_mode()
    def observe(self, context: DraftContext) -> int:
        """Inject the prompt's context keys/values chunk by chunk during the prefill."""
        feats = torch.cat([context.layer_hidden[i] for i in self.model.target_layer_ids], dim=-1)
        self.model.add_context(feats, context.hidden_start)
        return feats.shape[0]

    @torch.inference_mode()
    def propose(self, context: DraftContext) -> Proposal:
        m, seq, s = self.model, context.token_ids, context.hidden_start
        feats = [context.layer_hidden.get(i) for i in m.target_layer_ids]
        if any(f is None for f in feats) or feats[0].shape[0] != len(seq) - 1 - s:
            raise NinferError("The dflash drafter got no target hidden states; run it through LLM(draft='dflash').")
        m.add_context(torch.cat(feats, dim=-1), s)  # positions s..L-2; later (speculative) ones are dropped
        k = min(self.k, context.max_tokens)
        if k <= 0:
            return Proposal([], None, self.name)
        block = torch.tensor([seq[-1]] + [m.mask_token_id] * k, dtype=torch.int64, device=m.k_ctx[0].device)
        embeds = m.ops.embedding(block, self.target.embed_tokens) * m.embed_scale  # [k+1, H]
        hidden = m.block_hidden(embeds)[1:]  # [k, H]: positions 1..k predict the drafted tokens
        logits = m.logits(hidden, self.target.lm_head)
        if self.picker is None or self.picker.params is not context.params:
            self.picker = DraftSampler(context.params, logits.device)
        if m.v2:
            tokens, qs = m.select(hidden, logits, seq[-1], self.picker)
            return Proposal(tokens, qs, self.name)
        if self.picker.sampler is None:
            return Proposal(logits.argmax(dim=-1).tolist(), None, self.name)
        # one pass drafts every position independently, so each token is drawn from its own row
        picks = [self.picker.pick(row) for row in logits]
        return Proposal([t for t, _ in picks], [q for _, q in picks], self.name)
