"""The model runner: owns the KV cache and recurrent state of the one sequence, runs forwards.

``prefill`` (chunked, reusing the longest cached prefix), ``decode`` (one token) and ``verify``
(k tokens, for speculative decoding) all append to the sequence; ``truncate`` rolls it back.
"""

from __future__ import annotations

import torch

from ..kv.paged import PagedKVCache, SequenceKV
from ..reference.ops import rope_cos_sin
from .context import ForwardContext
from .cuda_graph import CudaGraphs, graphs_wanted

PENDING = -1  # a token of ``tokens`` appended from the device whose value the host does not know yet


class ModelRunner:
    def __init__(self, model, cfg, device: torch.device, dtype: torch.dtype, max_context: int,
                 block_size: int = 64, prefill_chunk: int = 2048, state_factory=None, kv_format: str = "bf16"):
        self.model, self.cfg, self.device, self.dtype = model, cfg, device, dtype
        self.max_context, self.prefill_chunk = max_context, prefill_chunk
        n_attn = len(cfg.attention_layers)
        num_blocks = (max_context + block_size - 1) // block_size
        self.kv = PagedKVCache(n_attn, num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim, dtype, device,
                                kv_format)
        self.seq = SequenceKV(self.kv, max_context, device)
        self.cos_sin = rope_cos_sin(max_context, cfg.rotary_dim, cfg.rope_theta, cfg.rope_scaling, device)
        self.state = state_factory() if state_factory else None  # recurrent state (hybrid models)
        self.tokens: list[int] = []  # token ids whose KV (and state) the cache holds
        self.last_ctx: ForwardContext | None = None
        backend = getattr(getattr(model, "ops", None), "backend", "reference")
        self.graphs = CudaGraphs(self) if graphs_wanted(device, backend) else None  # decode/verify replay

    # -- sequence management -------------------------------------------------------------
    def reset(self) -> None:
        self.seq.free()
        self.tokens = []
        if self.state is not None:
            self.state.reset()

    def truncate(self, n: int) -> None:
        """Keep the first n tokens. KV past n is simply overwritten later; recurrent state must be
        rolled back by the state object (only to a position it snapshotted)."""
        if n == len(self.tokens):
            return
        if self.state is not None:
            self.state.rollback(len(self.tokens), n)
        self.tokens = self.tokens[:n]

    def _reusable_prefix(self, ids: list[int]) -> int:
        p = 0
        limit = min(len(ids) - 1, len(self.tokens))  # at least one token must run to give logits
        while p < limit and ids[p] == self.tokens[p]:
            p += 1
        if self.state is not None and p != len(self.tokens):
            return 0  # recurrent state exists only at the end of the cached sequence
        return p

    # -- forwards --------------------------------------------------------------------------
    def forward(self, ids: list[int], phase: str, ids_t: torch.Tensor | None = None) -> torch.Tensor:
        """Append ids to the sequence; return final hidden states [T, H]. ``ids_t``: the ids as a device tensor
        (then ``ids`` is only what ``tokens`` records)."""
        start, T = len(self.tokens), len(ids)
        self.seq.ensure(start + T)
        positions = torch.arange(start, start + T, dtype=torch.int64)
        slots = self.seq.slots(positions)
        ctx = ForwardContext(positions=positions.to(self.device), slots=slots.to(self.device),
                             block_table=self.seq.block_table, kv=self.kv, cos_sin=self.cos_sin,
                             phase=phase, state=self.state)
        if ids_t is None:
            ids_t = torch.tensor(ids, dtype=torch.int64).to(self.device)
        hidden = self.model.forward(ids_t.view(T), ctx)
        self.tokens.extend(ids)
        self.last_ctx = ctx
        return hidden

    @torch.inference_mode()
    def prefill(self, ids: list[int]) -> torch.Tensor:
        """Run the prompt (reusing the cached prefix); return float32 logits of its last token [V]."""
        p = self._reusable_prefix(ids)
        if p == 0 and self.tokens:
            self.reset()
        else:
            self.truncate(p)
        rest = ids[p:]
        hidden = None
        for i in range(0, len(rest), self.prefill_chunk):
            hidden = self.forward(rest[i: i + self.prefill_chunk], "prefill")
        self.last_hidden = hidden[-1:]
        return self.model.logits(hidden[-1:])[0]

    @torch.inference_mode()
    def decode(self, token: int) -> torch.Tensor:
        if self.graphs is not None and self.graphs.usable(1):
            self.last_hidden, logits = self.graphs.step([token], "decode")
            return logits[0]
        hidden = self.forward([token], "decode")
        self.last_hidden = hidden
        return self.model.logits(hidden)[0]

    @torch.inference_mode()
    def decode_device(self, token: torch.Tensor) -> torch.Tensor:
        """Append one token that is still on the device (int64, one element: the previous step's sample) and
        return the logits after it [V] (float32), without waiting for the device. ``tokens`` records it as
        PENDING until the caller, once it has read the value, calls ``set_token``. With CUDA graphs the logits
        (and ``last_hidden``) are the graph's outputs, valid until the next decode step: sample them first."""
        if self.graphs is not None and self.graphs.usable(1):
            self.last_hidden, logits = self.graphs.step([PENDING], "decode", ids_dev=token, fresh=False)
            return logits[0]
        hidden = self.forward([PENDING], "decode", ids_t=token)
        self.last_hidden = hidden
        return self.model.logits(hidden)[0]

    def set_token(self, index: int, token: int) -> None:
        """Record the value of a token appended by ``decode_device``."""
        self.tokens[index] = token

    @torch.inference_mode()
    def verify(self, tokens: list[int]) -> torch.Tensor:
        """Append k tokens in one forward; return logits [k, V] (row i predicts the token after i)."""
        if self.graphs is not None and self.graphs.usable(len(tokens)):
            self.last_hidden, logits = self.graphs.step(tokens, "verify")
            return logits
        hidden = self.forward(tokens, "verify")
        self.last_hidden = hidden
        return self.model.logits(hidden)
