"""JSON Schema ``pattern`` (an ECMA-262 regular expression, matched anywhere in the string unless anchored) as a
nondeterministic automaton over code points, for :mod:`ninfer.engine.json_schema`: the string so far is kept only
while some continuation of it matches (every state is marked by whether a match is still reachable from it).

The subset: literals, ``.``, classes ``[a-z_]`` / ``[^...]``, ``\\d \\w \\s`` and their negations (ASCII digits and word
characters, as ECMA-262), escapes of punctuation and ``\\n \\r \\t \\f \\v \\0 \\xHH \\uHHHH``, groups ``(...)`` /
``(?:...)``, ``|``, quantifiers ``* + ? {n} {n,} {n,m}`` (lazy forms match the same strings), ``^`` at the start and
``$`` at the end. Anything else (look-arounds, back-references, ``\\b``, ``\\p{...}``, anchors elsewhere) is refused
by name with :class:`NinferError`, so a pattern is never half-applied.
"""

from __future__ import annotations

from ..errors import NinferError

MAX_CP = 0x10FFFF
MAX_STATES = 4096
_ANY = ((0, MAX_CP),)
_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
          (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF))
_DOT = ((0, 0x09), (0x0B, 0x0C), (0x0E, 0x2027), (0x202A, MAX_CP))  # not a line terminator
_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "0": 0}
_CLASSES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}


def _norm(ranges) -> tuple:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _negate(ranges) -> tuple:
    out, at = [], 0
    for lo, hi in _norm(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at <= MAX_CP:
        out.append((at, MAX_CP))
    return tuple(out)


def _meets(ranges, lo: int, hi: int) -> bool:
    return any(a <= hi and lo <= b for a, b in ranges)


class Pattern:
    """The automaton of one pattern: states with character edges (ranges of code points) and empty edges."""

    def __init__(self, pattern: str):
        if not isinstance(pattern, str):
            raise NinferError(f"json_schema pattern must be a string, got {pattern!r}.")
        self.source = pattern
        self.edges: list[list[tuple[tuple, int]]] = []
        self.eps: list[list[int]] = []
        body, head, tail = pattern, False, False
        if body.startswith("^"):
            body, head = body[1:], True
        if body.endswith("$") and (len(body) - 1 - len(body[:-1].rstrip("\\"))) % 2 == 0:  # not an escaped $
            body, tail = body[:-1], True
        self.p, self.i = body, 0
        start, end = self._alternation()
        if self.i != len(self.p):
            self._refuse(f"an unmatched {self.p[self.i]!r}")
        if (head or tail) and self._top_level_bar:
            self._refuse("^ or $ beside a top-level |; wrap the alternatives in a group, as ^(a|b)$")
        if not head:  # matched anywhere: anything may come before
            s = self._state()
            self.edges[s].append((_ANY, s))
            self.eps[s].append(start)
            start = s
        if not tail:
            e = self._state()
            self.edges[e].append((_ANY, e))
            self.eps[end].append(e)
            end = e
        self.accept = end
        self.start = self.closure({start})
        live = {end}  # states from which the accepting state is reachable
        changed = True
        while changed:
            changed = False
            for s in range(len(self.edges)):
                if s not in live and (any(t in live for t in self.eps[s])
                                      or any(t in live for _, t in self.edges[s])):
                    live.add(s)
                    changed = True
        self.live = live

    # ---- the automaton
    def closure(self, states) -> frozenset:
        seen, todo = set(states), list(states)
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)

    def step(self, states: frozenset, cp: int) -> frozenset:
        return self.step_range(states, cp, cp)

    def accepts(self, states: frozenset) -> bool:
        return self.accept in states

    def step_range(self, states: frozenset, lo: int, hi: int) -> frozenset:
        """The states after one character in [lo, hi], any of them (those from which a match is reachable)."""
        nxt = {t for s in states for ranges, t in self.edges[s] if _meets(ranges, lo, hi) and t in self.live}
        return self.closure(nxt) if nxt else frozenset()

    def fits(self, states: frozenset, least: int, most: int | None) -> bool:
        """Whether a match can be reached from ``states`` with k more characters, least <= k <= most (None: no
        limit). The layers of states k characters on repeat from some k on, so the search ends."""
        seen: dict[frozenset, int] = {}
        layers: list[frozenset] = []
        cur, k = states, 0
        while cur not in seen:
            if not cur or (most is not None and k > most):
                return False
            if k >= least and self.accept in cur:
                return True
            seen[cur] = k
            layers.append(cur)
            cur, k = self.step_range(cur, 0, MAX_CP), k + 1
        first, period = seen[cur], k - seen[cur]  # layer k + j * period = layer k for k >= first
        for j in range(first, first + period):
            if self.accept in layers[j]:
                at = j + max(0, -(-(max(least, k) - j) // period)) * period  # the first such k' >= least, >= k
                if most is None or at <= most:
                    return True
        return False

    # ---- the parse (recursive descent), building Thompson fragments (start, end)
    _top_level_bar = False

    def _refuse(self, what: str):
        raise NinferError(f"json_schema pattern {self.source!r} uses {what}, which ninfer cannot enforce while "
                          "generating; simplify the pattern or state it in the prompt.")

    def _state(self) -> int:
        if len(self.edges) >= MAX_STATES:
            self._refuse(f"more than {MAX_STATES} automaton states (large repeat counts)")
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def _alternation(self, depth: int = 0) -> tuple[int, int]:
        branches = [self._concat(depth)]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            if depth == 0:
                self._top_level_bar = True
            branches.append(self._concat(depth))
        if len(branches) == 1:
            return branches[0]
        s, e = self._state(), self._state()
        for bs, be in branches:
            self.eps[s].append(bs)
            self.eps[be].append(e)
        return s, e

    def _concat(self, depth: int) -> tuple[int, int]:
        s = e = self._state()
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            fs, fe = self._repeat(depth)
            self.eps[e].append(fs)
            e = fe
        return s, e

    def _repeat(self, depth: int) -> tuple[int, int]:
        begin = self.i
        frag = self._atom(depth)
        end = self.i
        if self.i >= len(self.p):
            return frag
        c = self.p[self.i]
        lo, hi = None, None
        if c in "*+?":
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{":
            close = self.p.find("}", self.i)
            inner = self.p[self.i + 1:close] if close > 0 else ""
            parts = inner.split(",")
            if close < 0 or len(parts) > 2 or not parts[0].isdigit() or (len(parts) == 2 and parts[1]
                                                                          and not parts[1].isdigit()):
                self._refuse("a '{' that is not a repeat count (escape it as \\{)")
            lo = int(parts[0])
            hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
            if hi is not None and hi < lo:
                self._refuse(f"the repeat {{{inner}}} (its maximum below its minimum)")
            self.i = close + 1
        if lo is None:
            return frag
        if self.i < len(self.p) and self.p[self.i] == "?":  # lazy: the same strings
            self.i += 1
        if self.i < len(self.p) and self.p[self.i] in "*+{":
            self._refuse("a repeated repeat (quantifier after a quantifier)")
        after = self.i

        def copy():  # a fresh copy of the atom: parse its text again
            saved = self.i
            self.i = begin
            f = self._atom(depth)
            assert self.i == end
            self.i = saved
            return f

        s = e = self._state()
        for k in range(lo):
            fs, fe = frag if k == 0 else copy()
            self.eps[e].append(fs)
            e = fe
        if hi is None:  # then any number more
            fs, fe = frag if lo == 0 else copy()
            loop = self._state()
            self.eps[e].append(loop)
            self.eps[loop].append(fs)
            self.eps[fe].append(loop)
            e = loop
        else:
            ends = [e]
            for k in range(hi - lo):
                fs, fe = frag if (lo == 0 and k == 0) else copy()
                self.eps[e].append(fs)
                e = fe
                ends.append(e)
            out = self._state()
            for x in ends:
                self.eps[x].append(out)
            e = out
        self.i = after
        return s, e

    def _atom(self, depth: int) -> tuple[int, int]:
        p, c = self.p, self.p[self.i]
        if c == "(":
            self.i += 1
            if p.startswith("?:", self.i):
                self.i += 2
            elif p.startswith("?", self.i):
                self._refuse("a look-around or named group '(?'")
            frag = self._alternation(depth + 1)
            if self.i >= len(p) or p[self.i] != ")":
                self._refuse("an unclosed '('")
            self.i += 1
            return frag
        if c in "^$":
            self._refuse(f"{c!r} other than at the pattern's start / end")
        if c in "*+?{":
            self._refuse(f"a quantifier {c!r} with nothing before it")
        if c == "[":
            ranges = self._class()
        elif c == ".":
            self.i += 1
            ranges = _DOT
        else:
            ranges = self._one(in_class=False)
        s, e = self._state(), self._state()
        self.edges[s].append((_norm(ranges), e))
        return s, e

    def _one(self, in_class: bool) -> tuple:
        """One character or escape at the cursor, as ranges."""
        if self.p[self.i] == "\\":
            return self._escape(in_class)
        self.i += 1
        return ((ord(self.p[self.i - 1]),) * 2,)

    def _escape(self, in_class: bool) -> tuple:
        p = self.p
        if self.i + 1 >= len(p):
            self._refuse("a trailing backslash")
        c = p[self.i + 1]
        self.i += 2
        if c in _CLASSES:
            return _CLASSES[c]
        if c.lower() in _CLASSES:
            return _negate(_CLASSES[c.lower()])
        if c in _ESCAPES:
            return ((_ESCAPES[c],) * 2,)
        if c in "xu":
            n = 2 if c == "x" else 4
            digits = p[self.i:self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                self._refuse(f"\\{c} without {n} hex digits")
            self.i += n
            return ((int(digits, 16),) * 2,)
        if c == "b" and in_class:
            return ((0x08, 0x08),)
        if c.isalnum():
            self._refuse(f"the escape \\{c}")
        return ((ord(c), ord(c)),)  # an escaped punctuation character stands for itself

    def _class(self) -> tuple:
        p = self.p
        self.i += 1
        neg = self.i < len(p) and p[self.i] == "^"
        if neg:
            self.i += 1
        ranges: list = []
        first = True
        while True:
            if self.i >= len(p):
                self._refuse("an unclosed '['")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            item = self._one(in_class=True)
            if (len(item) == 1 and item[0][0] == item[0][1] and self.i + 1 < len(p) and p[self.i] == "-"
                    and p[self.i + 1] != "]"):
                self.i += 1
                hi_item = self._one(in_class=True)
                if len(hi_item) != 1 or hi_item[0][0] != hi_item[0][1] or hi_item[0][0] < item[0][0]:
                    self._refuse("a character range out of order or with a class at its end")
                item = ((item[0][0], hi_item[0][0]),)
            ranges.extend(item)
        return _negate(ranges) if neg else _norm(ranges)
