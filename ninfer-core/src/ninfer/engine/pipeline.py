"""Decode one step ahead of the host.

A decode step on the GPU takes 3-15 ms for the shapes ninfer targets; between two steps the host reads the token,
checks stop conditions, detokenizes, stages the next step's positions and KV slots and launches its graph. Done in
turn, that host time is time the GPU idles: 100-650 us a step on the H200 (bench/RESULTS.md, 2026-12-03 session 8),
up to 8 % of the step. Here the next step is enqueued before the host waits for the token that feeds it: the
sample stays on the device (``Sampler.sample``), becomes the next step's input there (``ModelRunner.decode_device``),
and reaches the host through a pinned buffer and an event while the GPU already runs the next step.

The price is one step past the end: when a token finishes the output (a stop token, a stop string, cancellation), the
step that consumed it has already been enqueued. Its logits are dropped; its token stays in the cache of a model
with recurrent state (which cannot roll back one step; a next prompt that continues with that token, as a chat
template does after an end-of-turn token, still reuses the cache) and is truncated away otherwise. The length limit
is known ahead, so no step runs past it or past the context.
"""

from __future__ import annotations

import os

import torch


def wanted(device: torch.device) -> bool:
    """On CUDA by default; ``NINFER_PIPELINE=0`` turns it off, ``=1`` on for every device (the CPU gains nothing,
    the tests use it there to compare with the plain loop)."""
    env = os.environ.get("NINFER_PIPELINE", "")
    if env in ("0", "1"):
        return env == "1"
    return device.type == "cuda"


class DecodePipeline:
    """Tokens of one request, each step enqueued before the host waits for the token it consumes.

    ``next(feed)`` returns the next token; with ``feed`` the step that consumes that token is enqueued first.
    ``close()`` after the last token undoes a step that ran past it (see the module docstring)."""

    def __init__(self, runner, sampler, logits: torch.Tensor):
        self.runner, self.sampler = runner, sampler
        self.cuda = runner.device.type == "cuda"
        self.host = torch.empty(2, dtype=torch.int64, pin_memory=self.cuda)  # the tokens in flight, in turn
        self.events = [torch.cuda.Event() for _ in range(2)] if self.cuda else None
        self.turn = 0
        self.extra = False  # the last next() fed a step
        self.dev = self._sample(logits, 0)

    def _sample(self, logits: torch.Tensor, turn: int) -> torch.Tensor:
        tok = self.sampler.sample(logits)
        self.host[turn: turn + 1].copy_(tok, non_blocking=self.cuda)
        if self.cuda:
            self.events[turn].record()
        return tok

    def next(self, feed: bool) -> int:
        turn = self.turn
        index = None
        if feed:
            index = len(self.runner.tokens)
            logits = self.runner.decode_device(self.dev)
            self.dev = self._sample(logits, turn ^ 1)
        if self.cuda:
            self.events[turn].synchronize()
        token = int(self.host[turn])
        if index is not None:
            self.runner.set_token(index, token)
        self.turn ^= 1
        self.extra = feed
        return token

    def close(self) -> None:
        """After the last token: drop the step that consumed it, when one ran (``next(True)`` last)."""
        if self.extra:
            self.extra = False
            if self.cuda:
                torch.cuda.current_stream(self.runner.device).synchronize()
            if self.runner.state is None:
                self.runner.truncate(len(self.runner.tokens) - 1)
