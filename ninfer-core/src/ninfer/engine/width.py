"""How many drafted tokens to verify at each speculative step.

A verify forward of w tokens costs c(w) (measured: the wall time of the target's verify and the
acceptance read-back, per width); a chain of d = w - 1 drafted tokens yields on average
E(d) = 1 + sum_{i=1..d} prod_{j<=i} a_j tokens, where a_j is the drafter's rate of acceptance at
position j given that position j-1 was accepted. Each step takes the d that maximises
E(d) / (c(d + 1) + d * t_draft) (t_draft: the drafter's measured time per proposed token), capped by
what the drafter is asked for and by the context.

Both estimates forget old evidence geometrically, so a position that is no longer drafted drifts
back to the prior and gets tried again. Widths not measured yet are priced from the measured ones by
a linear fit (or, with one measurement, the prior slope): until a width has run, the policy assumes
the verify is bandwidth-bound (a few percent per extra token), as it is on a GPU with CUDA graphs.

``NINFER_VERIFY_WIDTH=max`` turns the choice off (always ask the drafter for as much as fits).
"""

from __future__ import annotations

import os

PRIOR_ACCEPT = 0.6  # acceptance assumed at a position never seen
PRIOR_WEIGHT = 2.0  # how many observations the prior is worth
FORGET = 0.98  # per step: weight kept by old acceptance evidence
PRIOR_SLOPE = 0.05  # relative cost of one more verified token, before any measurement
COST_EMA = 0.2  # weight of a new timing in a width's running cost


class VerifyCost:
    """Seconds per verify forward, by width (a width's first run is not counted: it may include a
    CUDA graph capture or a kernel compile)."""

    def __init__(self):
        self.seconds: dict[int, float] = {}
        self.seen: set[int] = set()

    def record(self, width: int, seconds: float) -> None:
        if width not in self.seen:
            self.seen.add(width)
            return
        old = self.seconds.get(width)
        self.seconds[width] = seconds if old is None else (1 - COST_EMA) * old + COST_EMA * seconds

    def cost(self, width: int) -> float | None:
        """Seconds for a verify of ``width`` tokens, measured or estimated; None before any measurement."""
        if width in self.seconds:
            return self.seconds[width]
        if not self.seconds:
            return None
        pts = sorted(self.seconds.items())
        if len(pts) == 1:
            w0, c0 = pts[0]
            base = c0 / (1 + PRIOR_SLOPE * (w0 - 1))
            return base * (1 + PRIOR_SLOPE * (width - 1))
        below = [p for p in pts if p[0] < width]
        above = [p for p in pts if p[0] > width]
        if below and above:  # between two measured widths: interpolate
            (w0, c0), (w1, c1) = below[-1], above[0]
            return c0 + (c1 - c0) * (width - w0) / (w1 - w0)
        (w0, c0), (w1, c1) = (pts[-2], pts[-1]) if below else (pts[0], pts[1])
        slope = max((c1 - c0) / (w1 - w0), 0.0)  # extrapolate the nearest two, never cheaper than measured
        return max(c0 + slope * (width - w0), c1 if width > w1 else 0.0, 1e-9)


class Acceptance:
    """Per-position conditional acceptance of one drafter (position 1 = the first drafted token)."""

    def __init__(self):
        self.accepted: list[float] = []
        self.tried: list[float] = []

    def rate(self, pos: int) -> float:
        i = pos - 1
        a = self.accepted[i] if i < len(self.accepted) else 0.0
        t = self.tried[i] if i < len(self.tried) else 0.0
        return (a + PRIOR_ACCEPT * PRIOR_WEIGHT) / (t + PRIOR_WEIGHT)

    def record(self, drafted: int, accepted: int) -> None:
        """A step with a chain of ``drafted`` tokens (maybe none), of which the first ``accepted`` were
        taken. Every step ages the evidence, so positions not drafted drift back to the prior."""
        self.accepted = [a * FORGET for a in self.accepted]
        self.tried = [t * FORGET for t in self.tried]
        need = drafted - len(self.tried)
        if need > 0:
            self.accepted += [0.0] * need
            self.tried += [0.0] * need
        for i in range(min(accepted + 1, drafted)):  # positions 1..accepted+1 were judged
            self.tried[i] += 1.0
            if i < accepted:
                self.accepted[i] += 1.0

    def expected_tokens(self, drafted: int) -> float:
        """Tokens a step yields on average with a chain of ``drafted`` tokens (the target's own included)."""
        total, p = 1.0, 1.0
        for pos in range(1, drafted + 1):
            p *= self.rate(pos)
            total += p
        return total


class WidthPolicy:
    """Chooses how many tokens to ask the drafter for at each step."""

    def __init__(self, cost: VerifyCost, acceptance: Acceptance | None = None, mode: str | None = None):
        self.cost = cost
        self.acceptance = acceptance or Acceptance()
        self.mode = (mode or os.environ.get("NINFER_VERIFY_WIDTH", "adaptive")).lower()
        self.draft_seconds = 0.0  # per proposed token, running mean
        self.draft_samples = 0

    def record_draft(self, tokens: int, seconds: float) -> None:
        if tokens <= 0:
            return
        per = seconds / tokens
        self.draft_samples += 1
        w = max(COST_EMA, 1.0 / self.draft_samples)
        self.draft_seconds = per if self.draft_samples == 1 else (1 - w) * self.draft_seconds + w * per

    def choose(self, room: int) -> int:
        """How many tokens to draft (0..room)."""
        if room <= 0:
            return 0
        if self.mode == "max" or self.cost.cost(1) is None:
            return room  # nothing measured yet: the first steps measure
        best, best_rate = 0, 0.0
        for d in range(0, room + 1):
            c = self.cost.cost(d + 1) + d * self.draft_seconds
            rate = self.acceptance.expected_tokens(d) / c
            if rate > best_rate * (1 + 1e-9):
                best, best_rate = d, rate
        return best

    def record(self, drafted: int, accepted: int, verify_seconds: float) -> None:
        self.cost.record(drafted + 1, verify_seconds)
        self.acceptance.record(drafted, accepted)
