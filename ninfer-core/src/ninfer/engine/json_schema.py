"""JSON Schema outputs (``SamplingParams(response_format="json_schema", json_schema=...)``, OpenAI's structured
outputs): the output is one JSON document valid against the schema, then the end of the turn.

:class:`JsonSchemaPrefix` keeps the output's bytes and says whether more bytes keep it a prefix of some valid
document, by a recursive-descent parse of the whole prefix that follows the schema and tracks every way a value
can end (``anyOf`` and numbers make more than one). :func:`ninfer.engine.json_mode.pick` samples among the tokens
that fit, as for JSON mode. The parse is incremental: a value's result that never reached the end of the text
(a closed string, object, number followed by a comma, ...) holds for every longer text, so once its bytes are kept
it is remembered by (schema node, position), and a try re-reads only the values still open at the end (and the
members of the containers holding them), not the whole output.

Enforced: ``type`` (one or a list), ``properties``, ``required``, ``additionalProperties`` (false, true or a
schema), ``items``, ``prefixItems``, ``minItems`` / ``maxItems``, ``minLength`` / ``maxLength``, ``enum``,
``const`` (with the other keywords beside them), ``minimum`` / ``maximum`` / ``exclusiveMinimum`` /
``exclusiveMaximum`` / ``multipleOf`` (such a number is written without an exponent, and a digit is taken only while
some number it leads to is in bounds and a multiple), ``minProperties`` / ``maxProperties``, ``anyOf``, ``oneOf``
(a value that one alternative alone accepts; a prefix is kept while any alternative may still take it), ``allOf``
and keywords beside a ``$ref`` (merged, where they do not set the same keyword to different values), ``pattern``
(:mod:`.json_pattern`: the common ECMA-262 subset; a string is kept while some continuation matches), ``$ref`` into
``$defs`` / ``definitions``. Annotations (``title``, ``description``, ``default``, ``examples``, ``format``,
``discriminator``, ...) are ignored. Keywords that restrict values but are not enforced here (``not``, ``if``,
``uniqueItems``, ``patternProperties``, ...) are refused by :func:`check_schema`, so a schema is never silently
half-applied.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

from ..errors import NinferError
from .json_mode import _HEX, _WS, MAX_WHITESPACE
from .json_pattern import MAX_CP, Pattern

_ESC = frozenset(b'"\\/bfnrt')
_ESC_CODE = {ord('"'): 0x22, ord("\\"): 0x5C, ord("/"): 0x2F, ord("b"): 0x08, ord("f"): 0x0C, ord("n"): 0x0A,
             ord("r"): 0x0D, ord("t"): 0x09}
MAX_DIGITS, MAX_EXP = 16, 3  # digits of a number's integer and fraction parts, and of its exponent
_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
_ENFORCED = {"type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
             "maxItems", "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs",
             "definitions", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "multipleOf",
             "minProperties", "maxProperties"}
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_ANY: dict = {}  # the schema ``true``
_COUPLED = ({"properties", "additionalProperties"}, {"prefixItems", "items"})
_IGNORED = {"title", "description", "default", "examples", "format", "$schema", "$id", "$comment", "strict",
            "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "name",
            "discriminator"}


def check_schema(schema, path: str = "$", root=None) -> None:
    """Raise NinferError naming the first keyword of ``schema`` that is neither enforced nor an annotation, or a
    ``$ref`` that points at nothing."""
    root = schema if root is None else root
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise NinferError(f"json_schema at {path} must be an object or a boolean, got {type(schema).__name__}.")
    for key, value in schema.items():
        where = f"{path}.{key}"
        if key not in _ENFORCED and key not in _IGNORED:
            raise NinferError(f"json_schema uses {key!r} at {path}, which ninfer cannot enforce while generating; "
                              f"remove it (or state it in the prompt).")
        if key == "type":
            kinds = value if isinstance(value, list) else [value]
            if not kinds or any(k not in _TYPES for k in kinds):
                raise NinferError(f"json_schema {where} must be one of {', '.join(_TYPES)} (or a list of them), "
                                  f"got {value!r}.")
        elif key in ("properties", "$defs", "definitions"):
            if not isinstance(value, dict):
                raise NinferError(f"json_schema {where} must be an object.")
            for name, sub in value.items():
                check_schema(sub, f"{where}.{name}", root)
        elif key in ("items", "additionalProperties"):
            check_schema(value, where, root)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if not isinstance(value, list) or (key != "prefixItems" and not value):
                raise NinferError(f"json_schema {where} must be a {'non-empty ' if key != 'prefixItems' else ''}list.")
            seen = {k: v for k, v in schema.items() if k != key}  # allOf: the keywords set so far, beside and before
            for i, sub in enumerate(value):
                check_schema(sub, f"{where}[{i}]", root)
                if key == "prefixItems":
                    continue
                part = _Parse(root, b"").resolve(sub)
                clash = _clash(seen if key == "allOf" else schema, part)
                if clash:
                    raise NinferError(f"json_schema {where}[{i}] sets {clash!r}, which {path} also sets to another "
                                      f"value; ninfer cannot combine the two: state it in one place.")
                if key == "allOf" and isinstance(part, dict):
                    seen.update(part)
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise NinferError(f"json_schema {where} must be a list of property names.")
        elif key in ("minItems", "maxItems", "minLength", "maxLength"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise NinferError(f"json_schema {where} must be a whole number >= 0, got {value!r}.")
        elif key in _BOUNDS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise NinferError(f"json_schema {where} must be a number, got {value!r}.")
            kinds = schema.get("type", "number")
            b = _bounds(schema, integer=kinds == "integer" or kinds == ["integer"])
            if b[0] is not None and b[1] is not None and not (b[0] < b[1] or b[0] == b[1] and b[2] and b[3]):
                raise NinferError(f"json_schema {path}: no number is within its bounds; loosen them.")
        elif key == "pattern":
            Pattern(value)  # refuses what it cannot enforce, by name
        elif key == "multipleOf":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise NinferError(f"json_schema {where} must be a number above 0, got {value!r}.")
            den = Fraction(str(value)).denominator
            while den % 2 == 0:
                den //= 2
            while den % 5 == 0:
                den //= 5
            if den != 1 or Fraction(str(value)).denominator > 10 ** MAX_DIGITS:
                raise NinferError(f"json_schema {where} {value!r} has multiples that are not short decimals; use a "
                                  "multiple such as 0.25 or 0.01.")
        elif key in ("minProperties", "maxProperties"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise NinferError(f"json_schema {where} must be a whole number >= 0, got {value!r}.")
            lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
            names = None if schema.get("additionalProperties", True) is not False else len(schema.get("properties", {}))
            if (hi is not None and (lo > hi or len(set(schema.get("required", []))) > hi)) or (names is not None
                                                                                             and lo > names):
                raise NinferError(f"json_schema {path}: no object has the properties its min / maxProperties, "
                                  "required and additionalProperties allow; loosen them.")
        elif key == "enum":
            if not isinstance(value, list) or not value:
                raise NinferError(f"json_schema {where} must be a non-empty list.")
        elif key == "$ref":
            if not isinstance(value, str) or not value.startswith("#"):
                raise NinferError(f"json_schema {where} must point inside the schema (\"#/$defs/...\"), "
                                  f"got {value!r}.")
            target = _Parse(root, b"").resolve({"$ref": value})
            clash = _clash({k: v for k, v in schema.items() if k != "$ref"}, target)
            if clash:
                raise NinferError(f"json_schema {path} sets {clash!r} beside its \"$ref\" and the schema it points at "
                                  "sets it to another value; ninfer cannot combine the two: state it in one place.")


def _clash(a, b) -> str | None:
    """A keyword that restricts values which both schemas set, to different values, or one of two keywords that
    read each other split between them (``additionalProperties`` applies to the properties its own schema does not
    list, ``items`` past its own ``prefixItems``); None if there is none. Merging the two into one schema (allOf, a
    $ref and the keywords beside it, an alternative and the keywords beside its anyOf) would change what they
    accept."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    same = next((k for k in b if k in a and k not in _IGNORED and k not in ("$defs", "definitions") and a[k] != b[k]),
                None)
    if same is not None:
        return same
    for group in _COUPLED:  # additionalProperties sees only the properties beside it; items only prefixItems beside it
        ka, kb = group & a.keys(), group & b.keys()
        if ka and kb and ka != kb:
            return sorted(ka | kb)[0]
    return None


class JsonSchemaPrefix:
    """The output so far against a schema: :meth:`feed` keeps bytes that leave it a prefix of a valid document."""

    def __init__(self, schema):
        check_schema(schema)
        self.schema = schema
        self.text = b""
        self.complete = False  # the text is a whole valid document (more bytes may still fit: a number's digits)
        self.more = True  # some longer text would still be valid
        self.free = False
        self._closed: dict = {}  # (id of a schema node, position) -> the value's result, closed in the kept text
        self._merged: dict = {}  # anyOf's merged alternatives, kept so that their ids stay theirs

    def feed(self, data: bytes) -> bool:
        text = self.text + data
        parse = _Parse(self.schema, text, self._closed, self._merged)
        complete, more = parse.root()
        if not (complete or more):
            return False
        self.text, self.complete, self.more = text, complete, more
        self._closed.update(parse.closed)  # closed in the text now kept, so in every text that goes on from it
        return True


class JsonThen:
    """A document valid against the schema, then exactly the text ``then`` (whitespace may come between them), then
    the end: ``SamplingParams(json_then=...)``. The server writes a forced tool call this way, the schema naming the
    tool and its parameters and ``then`` closing the call. A token may hold both the document's end and the text's
    start; it is split where the document is whole and the rest begins ``then``."""

    def __init__(self, schema, then: str):
        self.json = JsonSchemaPrefix(schema)
        self.then, self.done = then.encode(), b""
        self.free = False

    @property
    def complete(self) -> bool:
        return self.done == self.then

    @property
    def more(self) -> bool:
        return self.done != self.then

    def feed(self, data: bytes) -> bool:
        if not self.done:
            if self.json.feed(data):
                return True
            j = self.json
            for k in range(len(data)):
                head, tail = data[:k], data[k:]
                if self.then.startswith(tail) and _Parse(j.schema, j.text + head, j._closed, j._merged).root()[0]:
                    if head:
                        j.feed(head)
                    self.done = tail
                    return True
            return False
        if self.then[len(self.done):].startswith(data):
            self.done += data
            return True
        return False


class _Parse:
    """One parse of a prefix ``s``: each ``value`` call returns (ends, partial): the positions where a value of the
    schema starting at ``i`` can end, and whether the text running to the end of ``s`` is a proper prefix of one."""

    def __init__(self, root, s: bytes, known: dict | None = None, merged: dict | None = None):
        self.root_schema, self.s, self.n = root, s, len(s)
        self.depth = 0  # nested value() calls: a schema that refers to itself where no byte is read stops here
        self.cuts = 0  # values cut short by that depth limit (their results depend on the path, not kept)
        self.known = {} if known is None else known  # closed results of earlier, kept texts (read only here)
        self.merged = {} if merged is None else merged
        self.closed: dict = {}  # results this parse found closed: they never read the text's last byte's successor

    def root(self) -> tuple[bool, bool]:
        """(the text is a whole valid document, up to trailing whitespace; a longer text can be valid)."""
        i = self.ws(0)
        if i < 0:
            return False, False
        if i == self.n:
            return False, True
        ends, partial = self.value(self.root_schema, i)
        return any(self.ws(e) == self.n for e in ends), partial

    def ws(self, i: int) -> int:
        j = i
        while j < self.n and self.s[j] in _WS:
            j += 1
        return j if j - i <= MAX_WHITESPACE else -1

    def resolve(self, sch, depth: int = 0):
        """``sch`` with its $ref followed; keywords beside the $ref (other than annotations) are merged into the
        schema it points at (check_schema: they do not clash), the merge kept in ``merged``."""
        while isinstance(sch, dict) and "$ref" in sch:
            ref, node = sch["$ref"], self.root_schema
            for part in ref.lstrip("#").split("/")[1:] if ref != "#" else []:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(node, dict) or part not in node:
                    raise NinferError(f"json_schema $ref {ref!r} points at nothing.")
                node = node[part]
            if depth > 64:
                raise NinferError(f"json_schema $ref {ref!r} refers to itself without end.")
            beside = {k: v for k, v in sch.items() if k != "$ref"}
            if any(k not in _IGNORED and k not in ("$defs", "definitions") for k in beside):
                key = (id(sch), "$ref")
                if key not in self.merged:
                    target = self.resolve(node, depth + 1)
                    self.merged[key] = (False if target is False else
                                        {**beside, **target} if isinstance(target, dict) else beside)
                return self.merged[key]
            sch, depth = node, depth + 1
        return sch

    def value(self, sch, i: int) -> tuple[frozenset[int], bool]:
        """Memoised by (schema node, i) where closed: no way of reading the value reached the end of the text (it
        is not partial and does not end there), so no byte past the end can change the result. Schema nodes are
        the schema's own dicts or booleans, or anyOf's merged dicts held in ``merged``: their ids stay unique."""
        key = (id(sch), i)
        hit = self.known.get(key) or self.closed.get(key)
        if hit is not None:
            return hit
        if self.depth > 256:
            self.cuts += 1
            return frozenset(), False
        self.depth += 1
        cuts = self.cuts
        try:
            ends, partial = self._value(sch, i)
        finally:
            self.depth -= 1
        result = frozenset(ends), partial
        if not partial and self.n not in ends and self.cuts == cuts:
            self.closed[key] = result
        return result

    def _value(self, sch, i: int) -> tuple[set[int], bool]:
        sch = self.resolve(sch)
        if sch is False:
            return set(), False
        if sch is True:
            sch = _ANY
        if i == self.n:
            return set(), True
        ends: set[int] = set()
        partial = False

        def add(result):
            nonlocal partial
            ends.update(result[0])
            partial = partial or result[1]

        if "allOf" in sch:  # one schema with every part's keywords (check_schema: no clashes)
            key = (id(sch), "allOf")
            if key not in self.merged:
                merged = {k: v for k, v in sch.items() if k != "allOf"}
                for part in sch["allOf"]:
                    part = self.resolve(part)
                    if part is False:
                        merged = False
                        break
                    if isinstance(part, dict):
                        merged.update(part)
                self.merged[key] = merged
            return self.value(self.merged[key], i)
        for word in ("anyOf", "oneOf"):  # each alternative with the keywords beside it (check_schema: no clashes)
            if word not in sch:
                continue
            per = []
            for k, alt in enumerate(sch[word]):
                alt = self.resolve(alt)
                if alt is not False:
                    key = (id(sch), word, k)
                    if key not in self.merged:
                        base = {kw: v for kw, v in sch.items() if kw != word}
                        self.merged[key] = {**base, **alt} if isinstance(alt, dict) else base
                    alt = self.merged[key]
                per.append(self.value(alt, i))
            partial = any(p for _, p in per)
            if word == "anyOf":
                return set().union(*(e for e, _ in per)), partial
            counts: dict[int, int] = {}  # oneOf: where exactly one alternative's value ends
            for e, _ in per:
                for end in e:
                    counts[end] = counts.get(end, 0) + 1
            return {end for end, c in counts.items() if c == 1}, partial
        if "const" in sch or "enum" in sch:
            for lit in self.literals(sch):
                add(self.literal(lit, i))
            return ends, partial
        kinds = sch.get("type")
        if kinds is None:
            if {"properties", "required", "additionalProperties"} & sch.keys():
                kinds = ["object"]
            elif {"items", "prefixItems", "minItems", "maxItems"} & sch.keys():
                kinds = ["array"]
            elif {"minLength", "maxLength"} & sch.keys():
                kinds = ["string"]
            else:
                kinds = ["object", "array", "string", "number", "boolean", "null"]
        for kind in kinds if isinstance(kinds, list) else [kinds]:
            add(getattr(self, "v_" + kind)(sch, i))
        return ends, partial

    def literals(self, sch) -> list[bytes]:
        """The JSON texts of ``const`` / ``enum`` that also satisfy the schema's other keywords (a ``type`` beside
        an ``enum`` restricts it; ``const`` and ``enum`` together leave the values in both)."""
        key = (id(sch), "literals")
        if key not in self.merged:
            rest = {k: v for k, v in sch.items() if k not in ("const", "enum")}
            values = [sch["const"]] if "const" in sch else sch["enum"]
            if "const" in sch and "enum" in sch:
                rest["enum"] = sch["enum"]
            texts = [json.dumps(v, ensure_ascii=False).encode() for v in values]
            constrained = any(k not in _IGNORED and k not in ("$defs", "definitions") for k in rest)
            self.merged[key] = [t for t in texts
                                if not constrained or len(t) in _Parse(self.root_schema, t).value(rest, 0)[0]]
        return self.merged[key]

    def literal(self, lit: bytes, i: int) -> tuple[set[int], bool]:
        rest = self.s[i:i + len(lit)]
        if not lit.startswith(rest):
            return set(), False
        return ({i + len(lit)}, False) if len(rest) == len(lit) else (set(), True)

    def v_null(self, sch, i):
        return self.literal(b"null", i)

    def v_boolean(self, sch, i):
        e1, p1 = self.literal(b"true", i)
        e2, p2 = self.literal(b"false", i)
        return e1 | e2, p1 or p2

    def v_integer(self, sch, i):
        return self.bounded(sch, i, integer=True)

    def v_number(self, sch, i):
        return self.bounded(sch, i, integer=False)

    def bounded(self, sch, i: int, integer: bool) -> tuple[set[int], bool]:
        """A number within the schema's bounds: its ends where the value is in bounds, and partial only while some
        longer number is (an exact test on the intervals the digits so far can still reach, :func:`_reachable`)."""
        bounds, step = _bounds(sch, integer), _step(sch, integer)
        ends, partial = self.number(i, integer, exponent=bounds is None and step is None)
        if bounds is None and step is None:
            return ends, partial
        bounds = bounds or (None, None, True, True)
        ends = {e for e in ends if _inside(v := Fraction(self.s[i:e].decode()), bounds) and (step is None or
                                                                                              v % step == 0)}
        if partial:
            partial = any(_meets(r, bounds, step) for r in _reachable(self.s[i:self.n].decode(), integer))
        return ends, partial

    def number(self, i: int, integer: bool, exponent: bool = True) -> tuple[set[int], bool]:
        """-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, at most MAX_DIGITS digits a part (MAX_EXP in the
        exponent; llama.cpp's JSON grammar caps them too): a sampled number cannot run on to max_tokens."""
        s, n, j = self.s, self.n, i
        if j < n and s[j] == ord("-"):
            j += 1
        if j == n:
            return set(), True
        if s[j] == ord("0"):
            j += 1
            can_grow = not integer  # only a fraction or an exponent may follow a leading 0
        elif 0x31 <= s[j] <= 0x39:
            k = j
            while j < n and 0x30 <= s[j] <= 0x39:
                j += 1
            if j - k > MAX_DIGITS:
                return set(), False
            can_grow = j - k < MAX_DIGITS or not integer
        else:
            return set(), False
        if j == n:
            return {j}, can_grow
        for mark, signs, cap in ((b".", b"", MAX_DIGITS), (b"eE" if exponent else b"", b"+-", MAX_EXP)):
            if integer or s[j] not in mark:
                continue
            j += 1
            if signs and j < n and s[j] in signs:
                j += 1
            k = j
            while j < n and 0x30 <= s[j] <= 0x39:
                j += 1
            if j - k > cap:
                return set(), False
            if j == k:
                return set(), j == n
            if j == n:
                return {j}, True
        return {j}, False

    def string_body(self, i: int, codes: list | None = None) -> tuple[int, int, bool]:
        """From the opening quote at i: (end after the closing quote or -1, characters, viable to the text's end).
        ``codes``: a list that receives the string's code points; where the text ends inside a character (an
        escape, a UTF-8 sequence), ``self.pending`` is then the range of code points it can still become."""
        s, n, j, chars = self.s, self.n, i + 1, 0
        self.pending = None
        surrogate = False  # the last character was a high surrogate written as a \u escape
        while j < n:
            b = s[j]
            if b == ord('"'):
                return j + 1, chars, True
            if b < 0x20:
                return -1, chars, False
            if b == ord("\\"):
                if j + 1 == n:
                    self.pending = (0, MAX_CP)
                    return -1, chars, True
                c = s[j + 1]
                if c == ord("u"):
                    hexd = s[j + 2:j + 6]
                    if not all(h in _HEX for h in hexd):
                        return -1, chars, False
                    if len(hexd) < 4:
                        free = 4 * (4 - len(hexd))
                        low = (int(hexd, 16) if hexd else 0) << free
                        self.pending = (low, low + (1 << free) - 1)
                        return -1, chars, True
                    cp = int(hexd, 16)
                    j += 6
                    if 0xDC00 <= cp <= 0xDFFF and surrogate:  # the second half of a pair: one character
                        if codes is not None:
                            codes[-1] = 0x10000 + ((codes[-1] - 0xD800) << 10) + (cp - 0xDC00)
                        surrogate = False
                        continue
                    surrogate = 0xD800 <= cp <= 0xDBFF
                    if codes is not None:
                        codes.append(cp)
                    chars += 1
                    continue
                elif c in _ESC:
                    surrogate = False
                    if codes is not None:
                        codes.append(_ESC_CODE[c])
                    j += 2
                else:
                    return -1, chars, False
                chars += 1
                continue
            surrogate = False
            if b < 0x80:
                if codes is not None:
                    codes.append(b)
                j += 1
            else:
                size = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 0
                if not size:
                    return -1, chars, False
                tail = s[j + 1:j + size]
                if not all(0x80 <= t <= 0xBF for t in tail):
                    return -1, chars, False
                cp = b & (0x1F, 0x0F, 0x07)[size - 2]
                for t in tail:
                    cp = cp << 6 | (t & 0x3F)
                if len(tail) < size - 1:
                    free = 6 * (size - 1 - len(tail))
                    self.pending = (cp << free, (cp << free) | ((1 << free) - 1))
                    return -1, chars, True
                if codes is not None:
                    codes.append(cp)
                j += size
            chars += 1
        return -1, chars, True

    def v_string(self, sch, i):
        if self.s[i] != ord('"'):
            return set(), False
        if "pattern" in sch:
            return self.patterned(sch, i)
        end, chars, viable = self.string_body(i)
        lo, hi = sch.get("minLength", 0), sch.get("maxLength")
        if hi is not None and chars > hi:
            return set(), False
        if end < 0:
            return set(), viable
        return ({end}, False) if chars >= lo else (set(), False)

    def patterned(self, sch, i):
        """A string that must match ``pattern`` (:mod:`.json_pattern`), within its lengths: kept while some
        continuation matches with a length in bounds (exact, from the automaton's states after the characters so
        far; a character still being written counts as any code point it can become)."""
        key = (id(sch), "pattern")
        if key not in self.merged:
            self.merged[key] = Pattern(sch["pattern"])
        pat = self.merged[key]
        codes: list[int] = []
        end, chars, viable = self.string_body(i, codes)
        lo, hi = sch.get("minLength", 0), sch.get("maxLength")
        if not viable or (hi is not None and chars > hi):
            return set(), False
        states = pat.start
        for cp in codes:
            states = pat.step(states, cp)
            if not states:
                return set(), False
        if end >= 0:
            return ({end}, False) if pat.accepts(states) and chars >= lo else (set(), False)
        if self.pending is not None:
            states, chars = pat.step_range(states, *self.pending), chars + 1
        ok = bool(states) and (hi is None or chars <= hi) and pat.fits(states, max(0, lo - chars),
                                                                        None if hi is None else hi - chars)
        return set(), ok

    def key(self, names: list[str] | None, i: int) -> tuple[set[int], bool]:
        if names is None:
            return self.v_string({}, i)
        ends: set[int] = set()
        partial = False
        for name in names:
            e, p = self.literal(json.dumps(name, ensure_ascii=False).encode(), i)
            ends |= e
            partial = partial or p
        return ends, partial

    def v_object(self, sch, i):
        if self.s[i] != ord("{"):
            return set(), False
        props = sch.get("properties", {})
        required = set(sch.get("required", []))
        extra = sch.get("additionalProperties", True)
        least, most = sch.get("minProperties", 0), sch.get("maxProperties")
        ends: set[int] = set()
        partial = False
        # (position, keys seen, what comes next: "first" key or "}", "after" a value, a "key", the "colon" after key
        # name, the "value" of name); whitespace before each is skipped here, once
        todo = [(i + 1, frozenset(), "first", None)]
        while todo:
            pos, seen, mode, name = todo.pop()
            pos = self.ws(pos)
            if pos < 0:
                continue
            if pos == self.n:
                partial = True
                continue
            c = self.s[pos]
            if mode in ("first", "after") and c == ord("}"):
                if required <= seen and len(seen) >= least:
                    ends.add(pos + 1)
                continue
            names = [k for k in props if k not in seen] if extra is False else None
            if mode == "after":
                if c == ord(",") and names != [] and (most is None or len(seen) < most):  # where a key may come
                    todo.append((pos + 1, seen, "key", None))
            elif mode == "first" and most == 0:
                continue
            elif mode in ("first", "key"):
                kends, kp = self.key(names, pos)
                partial = partial or kp
                for ke in kends:
                    key = json.loads(self.s[pos:ke])
                    if key not in seen and (extra is not False or key in props):
                        todo.append((ke, seen, "colon", key))
            elif mode == "colon":
                if c == ord(":"):
                    todo.append((pos + 1, seen, "value", name))
            else:
                sub = props[name] if name in props else (extra if not isinstance(extra, bool) else True)
                vends, vp = self.value(sub, pos)
                partial = partial or vp or self.n in vends  # a whole value at the end: "," or "}" may follow
                todo.extend((ve, seen | {name}, "after", None) for ve in vends)
        return ends, partial

    def v_array(self, sch, i):
        if self.s[i] != ord("["):
            return set(), False
        prefix = sch.get("prefixItems", [])
        items = sch.get("items", True)
        lo, hi = sch.get("minItems", 0), sch.get("maxItems")
        ends: set[int] = set()
        partial = False
        todo = [(i + 1, 0, False)]  # (position, items so far, an item must come: after a ",")
        while todo:
            pos, count, must = todo.pop()
            pos = self.ws(pos)
            if pos < 0:
                continue
            if pos == self.n:
                partial = True
                continue
            c = self.s[pos]
            sub = prefix[count] if count < len(prefix) else items
            more = (hi is None or count < hi) and sub is not False  # another item may come
            if not must and c == ord("]"):
                if count >= lo:
                    ends.add(pos + 1)
            elif count and not must:
                if c == ord(",") and more:
                    todo.append((pos + 1, count, True))
            elif more:
                vends, vp = self.value(sub, pos)
                partial = partial or vp or self.n in vends
                todo.extend((ve, count + 1, False) for ve in vends)
        return ends, partial


# An interval of numbers: (low, high, low included, high included); None for no bound.
def _bounds(sch, integer: bool):
    """The schema's bounds as one interval, or None when it has none. For integers the ends move to the nearest
    integers inside, so that the interval's ends are reachable values."""
    if not any(k in sch for k in _BOUNDS):
        return None
    lo, lo_in, hi, hi_in = None, True, None, True
    for key, inclusive in (("minimum", True), ("exclusiveMinimum", False)):
        if key in sch:
            v = Fraction(str(sch[key]))
            if lo is None or v > lo or (v == lo and not inclusive):
                lo, lo_in = v, inclusive
    for key, inclusive in (("maximum", True), ("exclusiveMaximum", False)):
        if key in sch:
            v = Fraction(str(sch[key]))
            if hi is None or v < hi or (v == hi and not inclusive):
                hi, hi_in = v, inclusive
    if integer:
        if lo is not None:
            lo, lo_in = (Fraction(math.floor(lo) + 1) if lo.denominator == 1 and not lo_in else
                         Fraction(math.ceil(lo))), True
        if hi is not None:
            hi, hi_in = (Fraction(math.ceil(hi) - 1) if hi.denominator == 1 and not hi_in else
                         Fraction(math.floor(hi))), True
    return lo, hi, lo_in, hi_in


def _inside(v: Fraction, b) -> bool:
    lo, hi, lo_in, hi_in = b
    return ((lo is None or v > lo or (lo_in and v == lo))
            and (hi is None or v < hi or (hi_in and v == hi)))


def _step(sch, integer: bool) -> Fraction | None:
    """multipleOf as a fraction (for integers, the least integer multiple of it), or None."""
    if "multipleOf" not in sch:
        return None
    step = Fraction(str(sch["multipleOf"]))
    return Fraction(step.numerator) if integer else step


def _meets(r, b, step: Fraction | None = None) -> bool:
    """Whether the intervals r and b share a number (a multiple of ``step``, where given)."""
    (a1, b1, a1_in, b1_in), (a2, b2, a2_in, b2_in) = r, b
    if a1 is None or (a2 is not None and a2 > a1):
        lo, lo_in = a2, a2_in
    elif a2 is None or a1 > a2:
        lo, lo_in = a1, a1_in
    else:
        lo, lo_in = a1, a1_in and a2_in
    if b1 is None or (b2 is not None and b2 < b1):
        hi, hi_in = b2, b2_in
    elif b2 is None or b1 < b2:
        hi, hi_in = b1, b1_in
    else:
        hi, hi_in = b1, b1_in and b2_in
    if step is None:
        return lo is None or hi is None or lo < hi or (lo == hi and lo_in and hi_in)
    if lo is None or hi is None:
        return True  # (_reachable bounds every interval; an open end here is a schema's missing bound)
    first = math.ceil(lo / step) * step
    if first == lo and not lo_in:
        first += step
    return first < hi or (first == hi and hi_in)


def _reachable(prefix: str, integer: bool) -> list[tuple]:
    """The values of the numbers (no exponent, MAX_DIGITS digits a part) that strictly extend ``prefix``, a prefix of
    one, as a few intervals (low, high, low included, high included). For integers the intervals hold integers only,
    so that _meets against integer bounds (_bounds) is exact."""
    neg = prefix.startswith("-")
    body = prefix[1:] if neg else prefix
    out: list[tuple] = []
    if body == "":  # any magnitude the digit cap allows
        out.append((Fraction(0), Fraction(10 ** MAX_DIGITS), True, False))
    elif "." in body:
        whole, frac = body.split(".")
        if len(frac) < MAX_DIGITS:
            low = Fraction(whole + "." + frac) if frac else Fraction(whole)
            width = Fraction(1, 10 ** len(frac))
            out.append((low, low + width, True, False) if frac else (low, low + 1, True, False))
    else:
        v = int(body)
        if not integer:
            out.append((Fraction(v), Fraction(v + 1), True, False))  # a fraction
        if body != "0":
            for extra in range(1, MAX_DIGITS - len(body) + 1):  # more digits
                scale = 10 ** extra
                out.append((Fraction(v * scale), Fraction((v + 1) * scale - 1), True, True) if integer else
                           (Fraction(v * scale), Fraction((v + 1) * scale), True, False))
    if not neg:
        return out
    return [(-hi, -lo, hi_in, lo_in) for lo, hi, lo_in, hi_in in out]

