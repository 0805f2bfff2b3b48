"""The generation loop of one request: prefill, decode, stop conditions, text deltas, stats."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

import torch

from ..config.sampling import SamplingParams
from ..errors import ContextLengthError, NinferError
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


def generate_stream(runner, tokenizer, prompt_ids: list[int], params: SamplingParams, eos_ids: set[int],
                    cancel: threading.Event | None = None, drafter=None) -> Iterator[Chunk]:
    if not prompt_ids:
        raise NinferError("The prompt is empty; give at least one token of text.")
    n_prompt = len(prompt_ids)
    if n_prompt >= runner.max_context:
        raise ContextLengthError(f"The prompt has {n_prompt} tokens but the context holds {runner.max_context}; "
                                 "shorten the prompt or raise --max-context.")
    room = runner.max_context - n_prompt
    limit = room if params.max_tokens is None else min(params.max_tokens, room)
    stop_ids = set(params.stop_token_ids) | (set() if params.ignore_eos else set(eos_ids))
    sampler = Sampler(params, runner.device)
    detok = IncrementalDetokenizer(tokenizer)
    stops = StopStrings(params.stop)
    out_ids: list[int] = []
    text, emitted = "", 0  # full output text, and how much of it was sent
    pending_ids: list[int] = []
    pending_lp: list = []
    stats = {"prompt_tokens": n_prompt, "generated_tokens": 0, "verify_steps": 0,
             "prefill_seconds": 0.0, "decode_seconds": 0.0}

    t0 = time.perf_counter()
    logits = runner.prefill(prompt_ids)
    finish = None
    first = True
    t_dec = None
    while True:
        token = sampler(logits, prompt_ids, out_ids)
        if first:
            _sync(runner.device)
            stats["prefill_seconds"] = time.perf_counter() - t0
            t_dec = time.perf_counter()
            first = False
        if params.logprobs is not None:
            pending_lp.append(top_logprobs(logits, token, params.logprobs))
        out_ids.append(token)
        pending_ids.append(token)
        if token in stop_ids:
            finish = "stop"
        else:
            text += detok.add(token)
        if finish is None and stops.stops:
            cut = stops.find(text, emitted)
            if cut != -1:
                text, finish = text[:cut], "stop"
        if finish is None and len(out_ids) >= limit:
            finish = "length"
            text += detok.flush()
        if finish is None and cancel is not None and cancel.is_set():
            finish = "cancelled"
        safe = len(text) if finish else max(emitted, len(text) - stops.hold) if stops.stops else len(text)
        if finish or safe > emitted or params.logprobs is not None:
            chunk = Chunk(text[emitted:safe], pending_ids, None, None, pending_lp or None)
            emitted, pending_ids, pending_lp = safe, [], []
            if finish:
                _sync(runner.device)
                stats["generated_tokens"] = len(out_ids)
                stats["decode_seconds"] = time.perf_counter() - t_dec
                dec = len(out_ids) - 1
                stats["decode_tok_s"] = dec / stats["decode_seconds"] if dec > 0 and stats["decode_seconds"] > 0 else 0.0
                stats["prefill_tok_s"] = n_prompt / stats["prefill_seconds"] if stats["prefill_seconds"] > 0 else 0.0
                chunk.finish_reason, chunk.stats = finish, stats
                yield chunk
                return
            yield chunk
        logits = runner.decode(token)
        stats["verify_steps"] += 1
