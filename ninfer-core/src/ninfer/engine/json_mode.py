"""Constrained outputs. JSON mode (``SamplingParams(response_format="json_object")``, OpenAI's ``response_format``):
the output is one JSON object (RFC 8259), then the end of the turn. ``SamplingParams(starts_with=...)``: the output
begins with one of the given strings (:class:`StartsWith`).

:class:`JsonObjectPrefix` reads the output byte by byte as a pushdown automaton and says whether a token's bytes
keep it a prefix of some JSON object. :func:`pick` samples as the sampler would and rejects tokens that do not
fit the constraint:
a rejected token is masked and the draw repeated, which samples from the model's distribution over the tokens
that fit. Once the object is closed, the turn ends.
"""

from __future__ import annotations

import torch

_WS = frozenset(b" \t\n\r")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'"\\/bfnrtu')
MAX_WHITESPACE = 32  # a run of whitespace longer than this is refused: JSON mode's classic endless-newline loop

# modes: what the next byte may be
VALUE, FIRST, KEY_OR_END, KEY, COLON, AFTER, VALUE_OR_END, STRING, ESCAPE, UNICODE, NUMBER, LITERAL, DONE = range(13)
# number sub-states: after a sign, after a leading 0, in integer digits, after ".", in fraction digits, after
# "e", after the exponent's sign, in exponent digits
N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP = range(8)
_NUMBER_ENDS = frozenset({N_ZERO, N_INT, N_FRAC, N_EXP})


class JsonObjectPrefix:
    """The state after the bytes fed so far; :meth:`fits` tries bytes without keeping them.

    The constraints :func:`pick` takes share this shape: ``feed(bytes) -> bool`` keeps bytes that fit; ``complete``:
    the output may end here; ``more``: it may also go on; ``free``: the constraint no longer applies."""

    free = False

    def __init__(self):
        # (mode, stack of "{" / "[", aux, whitespace run): aux is the string's "key" flag, the hex digits left
        # in a \\u escape, the number's sub-state or a literal's remaining bytes
        self.state = (FIRST, (), None, 0)

    @property
    def complete(self) -> bool:
        return self.state[0] == DONE

    @property
    def more(self) -> bool:  # nothing follows a closed object but the end of the turn
        return not self.complete

    def fits(self, data: bytes) -> tuple | None:
        state = self.state
        for b in data:
            state = _step(state, b)
            if state is None:
                return None
        return state

    def feed(self, data: bytes) -> bool:
        state = self.fits(data)
        if state is None:
            return False
        self.state = state
        return True


class StartsWith:
    """``SamplingParams.starts_with``: the output so far must be a prefix of one of the choices or begin with one;
    once it begins with one it is :attr:`free` and the sampler draws as usual. Never :attr:`complete`: the end of
    the turn is the model's, after a choice."""

    complete = False
    more = True

    def __init__(self, choices: tuple[str, ...]):
        self.choices = [c.encode("utf-8") for c in choices]
        self.out = b""
        self.free = False

    def feed(self, data: bytes) -> bool:
        out = self.out + data
        if not any(c.startswith(out) or out.startswith(c) for c in self.choices):
            return False
        self.out = out
        self.free = any(out.startswith(c) for c in self.choices)
        return True


def _after_value(stack: tuple) -> tuple:
    return (AFTER, stack, None, 0) if stack else (DONE, stack, None, 0)


def _start_value(b: int, stack: tuple):
    if b == ord("{"):
        return (KEY_OR_END, stack + ("{",), None, 0)
    if b == ord("["):
        return (VALUE_OR_END, stack + ("[",), None, 0)
    if b == ord('"'):
        return (STRING, stack, (False, ()), 0)
    if b == ord("-"):
        return (NUMBER, stack, N_SIGN, 0)
    if b == ord("0"):
        return (NUMBER, stack, N_ZERO, 0)
    if b in _DIGITS:
        return (NUMBER, stack, N_INT, 0)
    for word in (b"true", b"false", b"null"):
        if b == word[0]:
            return (LITERAL, stack, word[1:], 0)
    return None


def _close(b: int, stack: tuple):
    if stack and ((b == ord("}") and stack[-1] == "{") or (b == ord("]") and stack[-1] == "[")):
        return _after_value(stack[:-1])
    return None


def _step(state: tuple, b: int):
    mode, stack, aux, ws = state
    if mode == STRING:  # aux: (a key?, the byte ranges the rest of a UTF-8 character must take)
        key, rest = aux
        if rest:
            lo, hi = rest[0]
            return (STRING, stack, (key, rest[1:]), 0) if lo <= b <= hi else None
        if b == ord('"'):
            return (COLON, stack, None, 0) if key else _after_value(stack)
        if b == ord("\\"):
            return (ESCAPE, stack, key, 0)
        if b < 0x20:  # raw control characters are not allowed in a string
            return None
        if b < 0x80:
            return state
        rest = _utf8_rest(b)
        return None if rest is None else (STRING, stack, (key, rest), 0)
    if mode == ESCAPE:
        if b not in _ESCAPES:
            return None
        return (UNICODE, stack, (aux, 4), 0) if b == ord("u") else (STRING, stack, (aux, ()), 0)
    if mode == UNICODE:
        if b not in _HEX:
            return None
        key, left = aux
        return (STRING, stack, (key, ()), 0) if left == 1 else (UNICODE, stack, (key, left - 1), 0)
    if mode == LITERAL:
        if b != aux[0]:
            return None
        return _after_value(stack) if len(aux) == 1 else (LITERAL, stack, aux[1:], 0)
    if mode == NUMBER:
        nxt = _number(aux, b)
        if nxt is not None:
            return (NUMBER, stack, nxt, 0)
        if aux not in _NUMBER_ENDS:
            return None
        return _step(_after_value(stack), b)  # the number ended: this byte follows it
    if b in _WS:  # between tokens of the grammar
        if mode == DONE or ws >= MAX_WHITESPACE:
            return None
        return (mode, stack, aux, ws + 1)
    if mode == FIRST:  # the top level is an object
        return (KEY_OR_END, ("{",), None, 0) if b == ord("{") else None
    if mode == VALUE:
        return _start_value(b, stack)
    if mode == VALUE_OR_END:
        return _close(b, stack) if b == ord("]") else _start_value(b, stack)
    if mode == KEY_OR_END:
        if b == ord("}"):
            return _close(b, stack)
        return (STRING, stack, (True, ()), 0) if b == ord('"') else None
    if mode == KEY:
        return (STRING, stack, (True, ()), 0) if b == ord('"') else None
    if mode == COLON:
        return (VALUE, stack, None, 0) if b == ord(":") else None
    if mode == AFTER:
        if b == ord(","):
            return (KEY, stack, None, 0) if stack[-1] == "{" else (VALUE, stack, None, 0)
        return _close(b, stack)
    return None  # DONE: nothing after the object


_CONT = (0x80, 0xBF)


def _utf8_rest(lead: int):
    """The ranges of the bytes that must follow a UTF-8 lead byte (Unicode's table 3-7: no overlong forms,
    no surrogates, nothing past U+10FFFF), or None for a byte that cannot lead."""
    if 0xC2 <= lead <= 0xDF:
        return (_CONT,)
    if lead == 0xE0:
        return ((0xA0, 0xBF), _CONT)
    if lead == 0xED:
        return ((0x80, 0x9F), _CONT)
    if 0xE1 <= lead <= 0xEF:
        return (_CONT, _CONT)
    if lead == 0xF0:
        return ((0x90, 0xBF), _CONT, _CONT)
    if 0xF1 <= lead <= 0xF3:
        return (_CONT, _CONT, _CONT)
    if lead == 0xF4:
        return ((0x80, 0x8F), _CONT, _CONT)
    return None


def _number(sub: int, b: int):
    digit = b in _DIGITS
    if sub == N_SIGN:
        return N_ZERO if b == ord("0") else N_INT if digit else None
    if sub in (N_ZERO, N_INT):
        if b == ord("."):
            return N_DOT
        if b in (ord("e"), ord("E")):
            return N_E
        return N_INT if digit and sub == N_INT else None
    if sub in (N_DOT, N_FRAC):
        if digit:
            return N_FRAC
        return N_E if sub == N_FRAC and b in (ord("e"), ord("E")) else None
    if sub == N_E:
        return N_ESIGN if b in (ord("+"), ord("-")) else N_EXP if digit else None
    return N_EXP if digit else None  # N_ESIGN, N_EXP


def pick(sampler, logits: torch.Tensor, prompt_ids: list[int], output_ids: list[int], prefix, tokenizer,
         eos_ids: set[int], tries: int = 64) -> int:
    """The next token of a constrained output (``prefix``: a JsonObjectPrefix, StartsWith or
    json_schema.JsonSchemaPrefix, which takes the token): the sampler's draw among the tokens that fit, the end of
    the turn among them once the output is complete, and the end itself once nothing more fits."""
    if prefix.complete and not prefix.more:
        return min(eos_ids)
    logits = sampler.penalise(logits.clone(), prompt_ids, output_ids)
    banned = tokenizer.special_token_ids | eos_ids  # control tokens are never JSON text

    def fits(t: int) -> bool:
        if t in eos_ids:  # the end of the turn, once the output is whole (a schema's number may also go on)
            return prefix.complete
        return t not in banned and prefix.feed(tokenizer.token_bytes(t))

    for _ in range(tries):  # the likely tokens fit nearly always: a few draws
        t = int(logits.argmax()) if sampler.p.greedy else sampler.draw(sampler.probs(logits))
        if fits(t):
            return t
        logits[t] = float("-inf")
    for t in logits.argsort(descending=True).tolist():  # otherwise the most likely one that fits
        if logits[t] == float("-inf"):
            break
        if fits(t):
            return t
    return min(eos_ids)  # no token continues the output (a vocabulary without the bytes it needs)
