"""The generation loop of one request: prefill, decode, stop conditions, text deltas, stats."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

import torch

from ..config.sampling import SamplingParams
from ..errors import ContextLengthError, NinferError
from . import pipeline
from .detokenizer import IncrementalDetokenizer
from .sampler import Sampler, top_logprobs


@dataclass
class Chunk:
    text: str  # new text since the last chunk
    token_ids: list[int]  # new tokens since the last chunk
    finish_reason: str | None = None  # None | "stop" | "length" | "cancelled"
    stats: dict | None = None  # on the last chunk
    logprobs: list | None = None  # per new token, when asked for


@dataclass
class Output:
    text: str
    token_ids: list[int]
    finish_reason: str
    stats: dict = field(default_factory=dict)
    logprobs: list | None = None


class StopStrings:
    """Finds the earliest stop string in the text and holds back text that could start one."""

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1

    def find(self, text: str, since: int) -> int:
        """Index where the first stop string starts at or after ``since - hold``, or -1."""
        best = -1
        lo = max(0, since - self.hold)
        for s in self.stops:
            i = text.find(s, lo)
            if i != -1 and (best == -1 or i < best):
                best = i
        return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class OutputTracker:
    """Per-token bookkeeping shared by the plain and the speculative loop: stop tokens, stop strings,
    the length limit, cancellation, held-back text and the chunks that carry it."""

    def __init__(self, tokenizer, params: SamplingParams, eos_ids: set[int], limit: int,
                 cancel: threading.Event | None):
        self.params, self.limit, self.cancel = params, limit, cancel
        self.stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_ids))
        self.detok = IncrementalDetokenizer(tokenizer)
        self.stops = StopStrings(params.stop)
        self.out_ids: list[int] = []
        self.text, self.emitted = "", 0  # full output text, and how much of it was sent
        self.pending_ids: list[int] = []
        self.pending_lp: list = []
        self.finish: str | None = None

    def add(self, token: int, logprob: dict | None = None) -> str | None:
        """Append one generated token; return the finish reason it causes, or None."""
        if logprob is not None:
            self.pending_lp.append(logprob)
        self.out_ids.append(token)
        self.pending_ids.append(token)
        finish = None
        if token in self.stop_ids:
            finish = "stop"
        else:
            self.text += self.detok.add(token)
        if finish is None and self.stops.stops:
            cut = self.stops.find(self.text, self.emitted)
            if cut != -1:
                self.text, finish = self.text[:cut], "stop"
        if finish is None and len(self.out_ids) >= self.limit:
            finish = "length"
            self.text += self.detok.flush()
        if finish is None and self.cancel is not None and self.cancel.is_set():
            finish = "cancelled"
        self.finish = finish
        return finish

    def take(self) -> Chunk | None:
        """The chunk to send now (text that can no longer turn into a stop string), or None."""
        stops, finish = self.stops, self.finish
        safe = len(self.text) if finish else max(self.emitted, len(self.text) - stops.hold) if stops.stops \
            else len(self.text)
        if not (finish or safe > self.emitted or self.params.logprobs is not None):
            return None
        chunk = Chunk(self.text[self.emitted:safe], self.pending_ids, None, None, self.pending_lp or None)
        self.emitted, self.pending_ids, self.pending_lp = safe, [], []
        return chunk


def new_stats(n_prompt: int) -> dict:
    return {"prompt_tokens": n_prompt, "generated_tokens": 0, "verify_steps": 0,
            "prefill_seconds": 0.0, "decode_seconds": 0.0}


def finish_stats(stats: dict, device: torch.device, n_out: int, t_dec: float) -> dict:
    _sync(device)
    stats["generated_tokens"] = n_out
    stats["decode_seconds"] = time.perf_counter() - t_dec
    dec = n_out - 1
    stats["decode_tok_s"] = dec / stats["decode_seconds"] if dec > 0 and stats["decode_seconds"] > 0 else 0.0
    n_prompt = stats["prompt_tokens"]
    stats["prefill_tok_s"] = n_prompt / stats["prefill_seconds"] if stats["prefill_seconds"] > 0 else 0.0
    return stats


def check_prompt(runner, prompt_ids: list[int], params: SamplingParams) -> int:
    """Validate the prompt against the context; return how many tokens may be generated."""
    if not prompt_ids:
        raise NinferError("The prompt is empty; give at least one token of text.")
    n_prompt = len(prompt_ids)
    if n_prompt >= runner.max_context:
        raise ContextLengthError(f"The prompt has {n_prompt} tokens but the context holds {runner.max_context}; "
                                 "shorten the prompt or raise the context (--max-context, LLM(max_context=...)).")
    room = runner.max_context - n_prompt
    return room if params.max_tokens is None else min(params.max_tokens, room)


def ready_chunk(out, finish: str | None, stats: dict, device: torch.device, t_dec: float) -> Chunk | None:
    """The text ready to send; the last one carries the finish reason and the request's stats."""
    chunk = out.take()
    if chunk is not None and finish:
        chunk.finish_reason, chunk.stats = finish, finish_stats(stats, device, len(out.out_ids), t_dec)
    return chunk


def generate_stream(runner, tokenizer, prompt_ids: list[int], params: SamplingParams, eos_ids: set[int],
                    cancel: threading.Event | None = None, drafter=None) -> Iterator[Chunk]:
    constrained = params.response_format in ("json_object", "json_schema") or bool(params.starts_with)
    if drafter is not None and not constrained:  # (a constraint picks each token itself: no drafts to verify)
        from .speculative import speculative_stream

        yield from speculative_stream(runner, tokenizer, prompt_ids, params, eos_ids, cancel, drafter)
        return
    limit = check_prompt(runner, prompt_ids, params)
    sampler = Sampler(params, runner.device)
    out = OutputTracker(tokenizer, params, eos_ids, limit, cancel)
    stats = new_stats(len(prompt_ids))

    t0 = time.perf_counter()
    logits = runner.prefill(prompt_ids)
    prefix = None
    if constrained:
        from .json_mode import JsonObjectPrefix, StartsWith, pick
        from .json_schema import JsonSchemaPrefix, JsonThen

        prefix = (StartsWith(params.starts_with) if params.starts_with else
                  JsonThen(params.json_schema, params.json_then) if params.json_then else
                  JsonSchemaPrefix(params.json_schema) if params.response_format == "json_schema" else
                  JsonObjectPrefix())
    elif pipeline.wanted(runner.device) and sampler.on_device() and params.logprobs is None:
        yield from _pipelined(runner, pipeline.DecodePipeline(runner, sampler, logits), out, stats, limit, t0)
        return
    t_dec = None
    while True:
        if prefix is not None and not prefix.free:
            token = pick(sampler, logits, prompt_ids, out.out_ids, prefix, tokenizer, eos_ids)
        else:
            token = sampler(logits, prompt_ids, out.out_ids)
        if t_dec is None:
            _sync(runner.device)
            stats["prefill_seconds"] = time.perf_counter() - t0
            t_dec = time.perf_counter()
        lp = top_logprobs(logits, token, params.logprobs) if params.logprobs is not None else None
        finish = out.add(token, lp)
        chunk = ready_chunk(out, finish, stats, runner.device, t_dec)
        if chunk is not None:
            yield chunk
            if finish:
                return
        logits = runner.decode(token)
        stats["verify_steps"] += 1


def _pipelined(runner, pipe, out: OutputTracker, stats: dict, limit: int, t0: float) -> Iterator[Chunk]:
    """generate_stream's loop with each decode step enqueued before the host reads the token it consumes
    (engine/pipeline.py): the same tokens, chunks and stats as the plain loop."""
    t_dec = None
    try:
        while True:
            feed = len(out.out_ids) + 1 < limit  # a step past the limit would never be used
            token = pipe.next(feed)
            if t_dec is None:
                stats["prefill_seconds"] = time.perf_counter() - t0
                t_dec = time.perf_counter()
            finish = out.add(token)
            if finish:
                pipe.close()
            chunk = ready_chunk(out, finish, stats, runner.device, t_dec)
            if chunk is not None:
                yield chunk
                if finish:
                    return
            stats["verify_steps"] += 1
    finally:
        pipe.close()  # a consumer that stops early (a closed stream) leaves no step behind
