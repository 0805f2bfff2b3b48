"""The drafter API: what a speculative drafter sees, what it returns, and how names become drafters.

A drafter proposes a chain of tokens that should follow the committed sequence; the target model
verifies the chain in one forward (``ninfer.engine.speculative``). Drafters are registered by
plugins through ``ninfer_register_drafters`` and chosen by a spec string::

    "lookup"            one drafter, default settings
    "mtp:3"             an argument (for most drafters: how many tokens to propose)
    "lookup:16,min=3"   options as key=value after the argument
    "dflash+lookup:16"  composition: the drafters' chains are merged per step (see ``Composite``)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import NinferError


@dataclass
class Proposal:
    """A drafted chain. ``probs`` (optional) holds, per position, the distribution the token was
    *sampled* from ([k, V] or a list of [V] / None); None means the token was chosen
    deterministically, which rejection sampling treats as a one-hot draft distribution."""

    tokens: list[int]
    probs: Any = None
    source: str | list[str] = ""  # the drafter's name, or one name per token
    override: bool = False  # a strong proposal (e.g. a long lookup match) that replaces others

    def sources(self, default: str) -> list[str]:
        if isinstance(self.source, list):
            return list(self.source)
        return [self.source or default] * len(self.tokens)

    def prob_rows(self) -> list:
        if self.probs is None:
            return [None] * len(self.tokens)
        return [self.probs[i] for i in range(len(self.tokens))]


@dataclass
class DraftContext:
    """What a drafter sees at one step.

    ``token_ids`` is the committed sequence (prompt + output); its last token has been chosen but not
    yet run through the target. Target hidden states cover positions ``hidden_start`` up to
    ``len(token_ids) - 2``: the tokens the target ran since the previous step (the whole prompt at
    the first step). They are present only when a drafter asked for them (``uses_hidden`` /
    ``target_layers``)."""

    token_ids: list[int]
    num_prompt: int
    max_tokens: int  # the longest chain worth proposing now (length limit, context room)
    hidden_start: int = 0
    hidden: torch.Tensor | None = None  # [n, H] after the final norm
    hidden_pre_norm: torch.Tensor | None = None  # [n, H] the residual stream before the final norm
    layer_hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> [n, H] its output
    params: Any = None  # SamplingParams of the request
    llm: Any = None
    runner: Any = None


class Drafter:
    """Base class. Subclasses set ``name`` and implement ``propose``; the rest is optional."""

    name: str = ""
    uses_hidden: bool = False  # wants context.hidden / hidden_pre_norm
    target_layers: tuple[int, ...] = ()  # decoder layers whose outputs it reads (context.layer_hidden)

    def __init__(self, llm=None, arg: str | None = None, **options):
        self.llm, self.arg, self.options = llm, arg, options

    def reset(self) -> None:
        """A new request starts; forget per-sequence state."""

    def propose(self, context: DraftContext) -> list[int] | Proposal:
        raise NotImplementedError

    def observe(self, context: DraftContext) -> int:
        """Optional, for drafters that read hidden states: during the prefill, take in the prompt's
        states chunk by chunk (``context.hidden*`` cover ``hidden_start`` onwards, all within
        ``token_ids``); return how many leading rows are consumed, which the first ``propose`` then
        does not get again. Rows given again must be handled idempotently."""
        return 0

    @property
    def observes(self) -> bool:
        return type(self).observe is not Drafter.observe

    # helpers for subclasses
    def int_arg(self, default: int) -> int:
        if self.arg is None or self.arg == "":
            return default
        try:
            k = int(self.arg)
        except ValueError:
            raise NinferError(f"Drafter {self.name!r} takes a token count, e.g. '{self.name}:4', "
                              f"not {self.arg!r}.") from None
        if k < 1:
            raise NinferError(f"Drafter {self.name!r} needs a token count of at least 1, got {k}.")
        return k

    def option(self, key: str, default, cast=int):
        if key not in self.options:
            return default
        try:
            return cast(self.options[key])
        except ValueError:
            raise NinferError(f"Drafter option {key}={self.options[key]!r} for {self.name!r} is not a valid "
                              f"{cast.__name__}.") from None


class DraftSampler:
    """How a model drafter picks its tokens for one request: argmax for greedy requests; for sampled
    ones a draw from the request's own distribution (temperature, top-k/p, min-p) of the draft
    logits, returning that distribution as q, which raises acceptance (sum of min(p, q)) over a
    one-hot draft. Its generator is seeded apart from the target sampler's."""

    def __init__(self, params, device):
        import dataclasses

        from .engine.sampler import Sampler

        self.params = params
        self.sampler = None
        if params is not None and not params.greedy:
            seed = None if params.seed is None else params.seed + 0x5EED
            self.sampler = Sampler(dataclasses.replace(params, seed=seed), device)

    def pick(self, logits: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        """logits [V] -> (token, q [V] or None for a deterministic pick)."""
        if self.sampler is None:
            return int(logits.argmax()), None
        q = self.sampler.probs(logits.float())
        return self.sampler.draw(q), q


def as_proposal(result, default_source: str) -> Proposal:
    """Normalise what ``propose`` returned (a list of ids, a Proposal, or None)."""
    if result is None:
        return Proposal([], None, default_source)
    if isinstance(result, Proposal):
        result.tokens = [int(t) for t in result.tokens]
        if not result.source:
            result.source = default_source
        return result
    return Proposal([int(t) for t in result], None, default_source)


class Composite(Drafter):
    """Several drafters, merged per step: the first non-empty chain is the base; a later proposal
    marked ``override`` (a long lookup match) replaces it; any later chain that agrees with the
    current one on their overlap extends it while it matches."""

    def __init__(self, drafters: list[Drafter]):
        super().__init__()
        self.drafters = drafters
        self.name = "+".join(d.name for d in drafters)
        self.uses_hidden = any(d.uses_hidden for d in drafters)
        self.target_layers = tuple(sorted({i for d in drafters for i in d.target_layers}))

    def reset(self) -> None:
        for d in self.drafters:
            d.reset()

    def _readers(self) -> list[Drafter]:
        return [d for d in self.drafters if d.uses_hidden or d.target_layers]

    @property
    def observes(self) -> bool:
        return bool(self._readers()) and all(d.observes for d in self._readers())

    def observe(self, context: DraftContext) -> int:
        # rows stay until every reader has them; a reader sees the rest again at its first propose
        return min(d.observe(context) for d in self._readers())

    def propose(self, context: DraftContext) -> Proposal:
        toks: list[int] = []
        srcs: list[str] = []
        rows: list = []
        for d in self.drafters:
            p = as_proposal(d.propose(context), d.name)
            t, s, r = p.tokens, p.sources(d.name), p.prob_rows()
            if not t:
                continue
            n = min(len(t), len(toks))
            agrees = toks[:n] == t[:n]
            if not toks or (p.override and not agrees):
                toks, srcs, rows = list(t), s, r
            elif agrees and len(t) > len(toks):
                if p.override:  # the strong chain claims the overlap, the weaker one keeps its tail
                    toks, srcs, rows = list(t), s, r
                else:
                    toks, srcs, rows = toks + t[n:], srcs + s[n:], rows + r[n:]
            elif agrees and p.override:
                srcs[:len(t)] = s
                rows[:len(t)] = r
        return Proposal(toks, rows if any(x is not None for x in rows) else None, srcs)


def parse_spec(spec: str) -> list[tuple[str, str | None, dict[str, str]]]:
    """'dflash+lookup:16,min=3' -> [('dflash', None, {}), ('lookup', '16', {'min': '3'})]."""
    parts = []
    for piece in spec.split("+"):
        piece = piece.strip()
        if not piece:
            raise NinferError(f"Draft spec {spec!r} has an empty part; write drafters joined by '+', "
                              "e.g. 'dflash+lookup:16'.")
        head, _, rest = piece.partition(",")
        name, _, arg = head.partition(":")
        opts = {}
        for kv in filter(None, (x.strip() for x in rest.split(","))):
            k, eq, v = kv.partition("=")
            if not eq:
                raise NinferError(f"Drafter option {kv!r} in {spec!r} needs the form key=value.")
            opts[k.strip()] = v.strip()
        parts.append((name.strip(), arg.strip() or None, opts))
    return parts


def registered_drafters() -> dict[str, type]:
    """Drafter classes by name, from every plugin's ``ninfer_register_drafters``."""
    from .plugins import collect

    found: dict[str, type] = {}
    for cls in collect("ninfer_register_drafters"):
        name = getattr(cls, "name", "")
        if not name or not (isinstance(cls, type) and issubclass(cls, Drafter)):
            raise NinferError(f"A plugin registered {cls!r} as a drafter; a drafter must subclass "
                              "ninfer.drafting.Drafter and set a name.")
        found.setdefault(name, cls)  # the first registration of a name wins
    return found


def build_drafter(spec: str, llm=None) -> Drafter:
    """Build the drafter (or composition) a spec string names."""
    known = registered_drafters()
    drafters = []
    for name, arg, opts in parse_spec(spec):
        cls = known.get(name)
        if cls is None:
            names = ", ".join(sorted(known)) or "none (install ninfer-drafters)"
            raise NinferError(f"Unknown drafter {name!r} in --draft {spec!r}; known drafters: {names}.")
        drafters.append(cls(llm=llm, arg=arg, **opts))
    return drafters[0] if len(drafters) == 1 else Composite(drafters)
