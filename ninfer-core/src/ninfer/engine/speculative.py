"""Speculative decoding: drafters propose, the target verifies the chain in one forward, the sampler
accepts a prefix, and the KV cache and recurrent state roll back to the accepted length.

Lossless by construction: greedy acceptance takes a drafted token only when it is the target's
argmax; for temperature > 0 a drafted token d is accepted with probability min(1, p(d)/q(d)) and a
rejection is resampled from normalise((p - q)+) (Leviathan et al. 2023), where q is one-hot for a
deterministic drafter. Each emitted token therefore has exactly the plain sampler's distribution.
"""

from __future__ import annotations

import threading
import time
from typing import Iterator

import torch

from ..config.sampling import SamplingParams
from ..drafting import DraftContext, as_proposal
from ..errors import NinferError
from .cuda_graph import MAX_WIDTH
from .generate import Chunk, OutputTracker, _sync, check_prompt, new_stats, ready_chunk
from .sampler import Sampler, top_logprobs
from .width import Acceptance, VerifyCost, WidthPolicy


def _penalties_on(p: SamplingParams) -> bool:
    return p.repetition_penalty != 1.0 or bool(p.presence_penalty) or bool(p.frequency_penalty)


def accept(logits: torch.Tensor, draft: list[int], q_rows: list, sampler: Sampler, prompt_ids: list[int],
           out_ids: list[int]) -> tuple[int, int]:
    """Verify a chain. logits: [k+1, V] from the target over [last, d1..dk] (row i predicts the token
    after input i). Returns (how many drafted tokens are accepted, the token that follows them)."""
    k = len(draft)
    greedy = sampler.p.greedy
    if greedy and not _penalties_on(sampler.p):
        best = logits.argmax(dim=-1).tolist()  # one device->host copy for the whole chain
        n = 0
        while n < k and best[n] == draft[n]:
            n += 1
        return n, int(best[n])
    for i in range(k + 1):
        row = sampler.penalise(logits[i].clone(), prompt_ids, out_ids + draft[:i])  # as if d1..di were output
        if greedy:
            t = int(row.argmax())
            if i < k and t == draft[i]:
                continue
            return i, t
        p = sampler.probs(row)
        if i == k:
            return k, sampler.draw(p)
        d, q = draft[i], q_rows[i]
        qd = 1.0 if q is None else float(q[d])
        u = float(torch.rand((), generator=sampler.gen, device=sampler.device))
        if u * qd < float(p[d]):
            continue
        if q is None:  # one-hot q: the residual is p without d
            residual = p.clone()
            residual[d] = 0.0
        else:
            residual = (p - q.to(p.dtype)).clamp_min(0.0)
        total = float(residual.sum())
        return i, sampler.draw(residual / total if total > 0 else p)
    raise AssertionError("unreachable")


class LayerTaps:
    """Copies the outputs of chosen decoder layers into persistent buffers during every target forward
    (for DFlash-style drafters). The copy is a device op, so CUDA graphs capture and replay it."""

    class _Tap:
        def __init__(self, layer, index: int, buffers: dict):
            self.__dict__.update(_inner=layer, _index=index, _buffers=buffers)

        def __call__(self, x, ctx):
            y = self._inner(x, ctx)
            buf = self._buffers[self._index]
            if y.shape[0] > buf.shape[0]:  # only eager forwards longer than a prefill chunk get here
                self._buffers.setdefault("retired", []).append(buf)  # a captured graph may still write it
                buf = self._buffers[self._index] = buf.new_empty(y.shape)
            buf[: y.shape[0]].copy_(y)
            return y

        def __getattr__(self, name):
            return getattr(self._inner, name)

    def __init__(self, runner, layers: tuple[int, ...]):
        model = runner.model
        if not hasattr(model, "_layer_tap_buffers"):
            model._layer_tap_buffers = {}
        self.buffers = model._layer_tap_buffers  # shared by every tap of the model
        n = len(model.layers)
        for i in layers:
            if not 0 <= i < n:
                raise NinferError(f"The drafter reads target layer {i} but the model has {n} layers; "
                                  "use a draft checkpoint made for this model.")
            if i not in self.buffers:  # [rows, H]: allocated before any graph capture, never inside one
                self.buffers[i] = torch.zeros(max(runner.prefill_chunk, 64), runner.cfg.hidden_size,
                                              dtype=runner.dtype, device=runner.device)
            if not isinstance(model.layers[i], LayerTaps._Tap):
                model.layers[i] = LayerTaps._Tap(model.layers[i], i, self.buffers)
                if getattr(runner, "graphs", None) is not None:  # graphs captured before lack the copy
                    runner.graphs = type(runner.graphs)(runner)
        self.layers = layers

    def take(self, rows: int) -> dict[int, torch.Tensor]:
        """The tapped outputs of the last forward (its first ``rows`` rows): layer -> [rows, H]."""
        return {i: self.buffers[i][:rows].clone() for i in self.layers}


class _TargetHidden:
    """Captures, per target forward, what hidden-state drafters read."""

    def __init__(self, runner, drafter):
        self.runner, self.drafter = runner, drafter
        self.want = drafter.uses_hidden or bool(drafter.target_layers)
        self.taps = LayerTaps(runner, drafter.target_layers) if drafter.target_layers else None
        # the final hidden states are kept only for drafters that read them (the last tapped layer's
        # output is the final hidden state): a long prompt's states are large
        self.keep_final = drafter.uses_hidden or (len(runner.model.layers) - 1) in drafter.target_layers
        self.start, self.post, self.pre, self.layers = 0, None, None, {}

    def prefill(self, ids: list[int]) -> torch.Tensor:
        """Run the whole prompt (no prefix reuse: drafters need every position's hidden state). A
        drafter that observes takes the states in chunk by chunk; for others they are gathered."""
        r = self.runner
        if not self.want:
            return r.prefill(ids)
        r.reset()
        self.start, self.post, self.pre, self.layers = 0, None, None, {}
        chunks = []
        with torch.inference_mode():
            for i in range(0, len(ids), r.prefill_chunk):
                chunk = ids[i: i + r.prefill_chunk]
                h = r.forward(chunk, "prefill")
                got = (h, r.last_ctx.hidden_pre_norm, self.taps.take(len(chunk)) if self.taps else {})
                if not self.drafter.observes:
                    chunks.append(got)
                    continue
                self._append([got])
                ctx = DraftContext(ids, len(ids), 0, self.start, self.post, self.pre, self.layers)
                self._drop(self.drafter.observe(ctx))
            if chunks:
                self._append(chunks)
            r.last_hidden = h[-1:]
            return r.model.logits(h[-1:])[0]

    def _append(self, chunks: list) -> None:
        """chunks: (final hidden [T, H], pre-norm [T, H], {layer: [T, H]}) of consecutive forwards."""
        last = len(self.runner.model.layers) - 1  # its output, as transformers reports it, is after the norm
        if self.keep_final:
            self.post = torch.cat(([self.post] if self.post is not None else []) + [c[0] for c in chunks])
            self.pre = torch.cat(([self.pre] if self.pre is not None else []) + [c[1] for c in chunks])
        if self.taps is not None:
            self.layers = {i: torch.cat(([self.layers[i]] if i in self.layers else [])
                                        + [c[0] if i == last else c[2][i] for c in chunks])
                           for i in self.taps.layers}

    def _drop(self, n: int) -> None:
        if n <= 0:
            return
        self.start += n
        if self.post is not None:
            self.post, self.pre = self.post[n:], self.pre[n:]
        self.layers = {i: v[n:] for i, v in self.layers.items()}

    def verify(self, tokens: list[int]) -> torch.Tensor:
        """The target forward over [last, drafts]: logits [k+1, V] (CUDA graphs replay the taps' copies)."""
        return self.runner.verify(tokens)

    def after_verify(self, start: int, keep: int) -> None:
        """The verify forward ran positions start..; the first ``keep`` rows are now committed."""
        if not self.want:
            return
        r = self.runner
        self.start, self.post, self.pre, self.layers = start, None, None, {}
        # pre-norm states live in a graph's static buffer that the next replay reuses: copy them
        got = (r.last_hidden[:keep], r.last_ctx.hidden_pre_norm[:keep].clone(),
               {i: v[:keep] for i, v in self.taps.take(r.last_hidden.shape[0]).items()} if self.taps else {})
        self._append([got])


def width_policy(runner, drafter) -> WidthPolicy:
    """The verify-width policy of this runner (its measured verify costs) and drafter (its acceptance),
    kept across requests."""
    cost = runner.__dict__.setdefault("verify_cost", VerifyCost())
    policy = drafter.__dict__.get("_ninfer_width")
    if policy is None or policy.cost is not cost:
        policy = drafter.__dict__["_ninfer_width"] = WidthPolicy(cost, Acceptance())
    return policy


def speculative_stream(runner, tokenizer, prompt_ids: list[int], params: SamplingParams, eos_ids: set[int],
                       cancel: threading.Event | None, drafter) -> Iterator[Chunk]:
    limit = check_prompt(runner, prompt_ids, params)
    sampler = Sampler(params, runner.device)
    out = OutputTracker(tokenizer, params, eos_ids, limit, cancel)
    stats = new_stats(len(prompt_ids))
    stats.update(drafted_tokens=0, accepted_tokens=0, drafters={})
    drafter.reset()
    policy = width_policy(runner, drafter)
    target = _TargetHidden(runner, drafter)
    llm = getattr(drafter, "llm", None)
    vocab = runner.cfg.vocab_size

    t0 = time.perf_counter()
    logits = target.prefill(prompt_ids)
    token = sampler(logits, prompt_ids, [])
    _sync(runner.device)
    stats["prefill_seconds"] = time.perf_counter() - t0
    t_dec = time.perf_counter()
    lp = top_logprobs(logits, token, params.logprobs) if params.logprobs is not None else None
    finish = out.add(token, lp)
    while True:
        chunk = ready_chunk(out, finish, stats, runner.device, t_dec)
        if chunk is not None:
            yield chunk
            if finish:
                return
        # -- draft ------------------------------------------------------------------------
        seq = prompt_ids + out.out_ids
        base = len(runner.tokens)  # == len(seq) - 1: the last token is not in the cache yet
        room = min(limit - len(out.out_ids) - 1, runner.max_context - base - 1)
        if getattr(runner, "graphs", None) is not None:  # stay within the widths captured as CUDA graphs
            room = min(room, MAX_WIDTH - 1)
        want = policy.choose(room)  # tokens worth drafting now, by measured cost and acceptance
        ctx = DraftContext(seq, len(prompt_ids), want, target.start, target.post, target.pre,
                           target.layers, params, llm, runner)
        t_draft = time.perf_counter()
        # a drafter that reads hidden states takes this step's rows in even when asked for nothing
        prop = as_proposal(drafter.propose(ctx) if want > 0 or (target.want and room > 0) else None, drafter.name)
        draft = prop.tokens[:want]
        bad = next((i for i, t in enumerate(draft) if not 0 <= t < vocab), None)
        if bad is not None:  # a drafter's token outside the vocabulary cannot be verified: stop there
            draft = draft[:bad]
        sources, q_rows = prop.sources(drafter.name)[:len(draft)], prop.prob_rows()[:len(draft)]
        # -- verify -----------------------------------------------------------------------
        t_verify = time.perf_counter()
        policy.record_draft(len(draft), t_verify - t_draft)
        logits = target.verify([token] + draft)  # [k+1, V]
        n_acc, nxt = accept(logits, draft, q_rows, sampler, prompt_ids, out.out_ids)  # reads back: synced
        policy.record(len(draft), n_acc, time.perf_counter() - t_verify)
        runner.truncate(base + n_acc + 1)
        target.after_verify(base, n_acc + 1)
        stats["verify_steps"] += 1
        stats["drafted_tokens"] += len(draft)
        stats["accepted_tokens"] += n_acc
        for i, s in enumerate(sources):
            per = stats["drafters"].setdefault(s, {"drafted": 0, "accepted": 0})
            per["drafted"] += 1
            per["accepted"] += int(i < n_acc)
        # -- emit -------------------------------------------------------------------------
        for j, t in enumerate(draft[:n_acc] + [nxt]):
            lp = top_logprobs(logits[j], t, params.logprobs) if params.logprobs is not None else None
            finish = out.add(t, lp)
            token = t
            if finish:
                break
