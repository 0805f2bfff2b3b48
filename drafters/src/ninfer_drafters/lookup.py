"""Lookup drafting (prompt lookup / n-gram speculation): if the last n tokens occurred before in the
sequence (prompt or output), propose what followed them then.

Longest match first (n from ``max`` down to ``min``), most recent occurrence wins. Free to run and
very effective when the answer quotes its context (code edits, summaries, RAG).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ninfer.drafting import DraftContext, Drafter, Proposal
from ninfer.errors import NinferError


def find_continuation(seq: np.ndarray, n: int, k: int) -> list[int]:
    """The k tokens that followed the most recent earlier occurrence of seq's last n tokens, or []."""
    L = len(seq)
    if L <= n:
        return []
    windows = sliding_window_view(seq[: L - 1], n)  # [L-n, n]: every n-gram that ends before the last token
    hits = np.flatnonzero((windows == seq[L - n:]).all(axis=1))
    if hits.size == 0:
        return []
    start = int(hits[-1]) + n  # the most recent occurrence
    return seq[start: start + k].tolist()


class LookupDrafter(Drafter):
    """``lookup[:k][,min=2][,max=5][,override=3]``: propose up to k tokens (default 10)."""

    name = "lookup"

    def __init__(self, llm=None, arg=None, **options):
        super().__init__(llm, arg, **options)
        self.k = self.int_arg(10)
        self.min_match = self.option("min", 2)
        self.max_match = self.option("max", 5)
        # a match at least this long overrides a model drafter's chain when composed
        self.override_at = self.option("override", 3)
        unknown = set(options) - {"min", "max", "override"}
        if unknown:
            raise NinferError(f"lookup has no option {sorted(unknown)[0]!r}; it takes min, max and override.")
        if not 1 <= self.min_match <= self.max_match:
            raise NinferError(f"lookup needs 1 <= min <= max, got min={self.min_match} max={self.max_match}.")

    def propose(self, context: DraftContext) -> Proposal:
        seq = np.asarray(context.token_ids, dtype=np.int64)
        k = min(self.k, context.max_tokens)
        if k <= 0:
            return Proposal([], None, self.name)
        for n in range(min(self.max_match, len(seq) - 1), self.min_match - 1, -1):
            cont = find_continuation(seq, n, k)
            if cont:
                return Proposal(cont, None, self.name, override=n >= self.override_at)
        return Proposal([], None, self.name)
