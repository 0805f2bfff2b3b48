"""JSON-schema outputs (ninfer.engine.json_schema) against the jsonschema package's validator, and on the real model."""

from __future__ import annotations

import json
import random
import zlib

import jsonschema
import pytest

from ninfer.engine.json_schema import JsonSchemaPrefix, _Parse, check_schema
from ninfer.errors import NinferError

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer"},
        "height": {"type": ["number", "null"]},
        "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 3},
        "role": {"enum": ["admin", "user", 7]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
    "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
                      "required": ["kind"], "additionalProperties": False}},
}
TREE = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number"}, "kids": {
    "type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node"}
CHOICE = {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "array", "prefixItems": [{"type": "integer"},
                                                                                          {"type": "boolean"}],
                                                           "items": False, "minItems": 2},
                    {"type": "object", "additionalProperties": {"type": "integer"}}]}
OPEN = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}  # other keys: anything
# oneOf: a value that two alternatives accept is not valid ({"a": 1, "b": "s"}; "x", both a short string and in the enum)
ONE = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                 {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
                 {"type": "string", "maxLength": 2}, {"enum": ["x", "yy", "zzz", 5]}]}
# keywords beside enum / const / anyOf apply too: "type" leaves only the enum's strings; const and enum their common value
BESIDE = {"type": "object", "additionalProperties": False, "properties": {
    "e": {"type": "string", "enum": ["a", 1, "b", None]}, "c": {"const": 3, "enum": [1, 3]},
    "s": {"type": "string", "anyOf": [{"minLength": 2}, True]}, "n": {"type": "integer", "oneOf": [{"enum": [1, 2]}, {
        "enum": [2, 3]}]}}}
# allOf and keywords beside a $ref are merged into one schema
MERGED = {"$defs": {"name": {"type": "string", "maxLength": 4}, "obj": {"type": "object", "required": ["a"]}},
          "allOf": [{"$ref": "#/$defs/obj"}, {"properties": {"a": {"$ref": "#/$defs/name", "minLength": 2},
                                                                "b": {"allOf": [{"type": "integer"}, {"maximum": 5}]}},
                                               "additionalProperties": False}]}
COUNTED = {"type": "object", "minProperties": 1, "maxProperties": 2, "properties": {"a": {"type": "integer"}},
           "additionalProperties": {"type": "boolean"}}
SCHEMAS = {"counted": COUNTED, "person": PERSON, "tree": TREE, "choice": CHOICE, "open": OPEN, "any": True, "one": ONE, "beside": BESIDE,
           "merged": MERGED}

VALID = {
    "person": [{"name": "Ann", "age": 30, "role": "admin"},
               {"name": "Bo \u00e9\u6f22", "age": -2, "role": 7, "height": 1.5e2, "pets": [{"kind": "cat", "lives": 9}],
                "ok": True},
               {"role": "user", "age": 0, "name": "x\"y\\z\n", "height": None, "pets": []}],
    "tree": [{"v": 1}, {"v": -0.5, "kids": [{"v": 2, "kids": []}, {"v": 3e-2}]}],
    "choice": ["abc", "", [1, True], {"x": 1, "y": -3}, {}],
    "open": [{"a": 1, "b": [None, {"c": "d"}]}, {"z": False, "a": 12}],
    "any": [1, "s", [1, {"a": None}], {"k": [True, 2.5]}, None],
    "one": [{"a": 1}, {"b": "s", "c": None}, "zzz", 5, "", "q"],
    "beside": [{"e": "a", "c": 3, "s": "q", "n": 1}, {}, {"e": "b", "s": "", "n": 3}],
    "counted": [{"a": 1}, {"a": 2, "x": True}, {"y": False}],
    "merged": [{"a": "xy"}, {"a": "wxyz", "b": -3}, {"b": 5, "a": "abc"}],
}


def _fed(schema, data: bytes, step: int = 1) -> tuple[bool, bool]:
    """(every piece fitted, the whole is a complete document)."""
    p = JsonSchemaPrefix(schema)
    for i in range(0, len(data), step):
        if not p.feed(data[i:i + step]):
            return False, False
    return True, p.complete


@pytest.mark.parametrize("name", list(VALID))
def test_every_prefix_of_a_valid_document_fits_and_the_whole_is_complete(name):
    for doc in VALID[name]:
        jsonschema.validate(doc, SCHEMAS[name])  # the fixtures are valid by the reference validator
        for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False, indent=2), json.dumps(doc, separators=(",", ":"))):
            data = text.encode()
            for step in (1, 3):
                assert _fed(SCHEMAS[name], data, step) == (True, True), (name, text)


def _mutations(rng: random.Random, text: str, n: int) -> list[str]:
    pieces = list('{}[]",:0123456789-.eE truefalsnul\\abc') + ['"name"', '"age"', '"kind"', '"cat"', '"v"', "null",
                                                                 '"a": 1', '"b": "x"', '"x"']
    out = []
    for _ in range(n):
        t = text
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(t) + 1)
            op = rng.random()
            if op < 0.4 and t:
                t = t[:i] + t[i + 1:]
            elif op < 0.8:
                t = t[:i] + rng.choice(pieces) + t[i:]
            else:
                t = t[:i] + rng.choice(pieces) + t[i + 1:]
        out.append(t)
    return out


@pytest.mark.parametrize("name", list(VALID))
def test_mutated_documents_are_accepted_exactly_when_the_reference_validator_accepts_them(name):
    """Thousands of near-valid texts: ninfer's parse takes a text whole (every byte fits and it is complete)
    exactly when json.loads parses it and jsonschema validates it."""
    rng = random.Random(zlib.crc32(name.encode()))  # (str hashes change from run to run)
    schema = SCHEMAS[name]
    agree = {True: 0, False: 0}
    for doc in VALID[name]:
        for text in _mutations(rng, json.dumps(doc), 300):
            try:
                ref = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
            except ValueError:
                ref = False
            if ref and text != text.strip():
                continue  # (leading / trailing whitespace beyond the parser's cap is not the point here)
            assert _fed(schema, text.encode()) == (ref, ref) or (not ref and not _fed(schema, text.encode())[1]), text
            agree[ref] += 1
    assert agree[True] > 10 and agree[False] > 100  # both sides exercised


def test_a_number_may_go_on_and_a_closed_object_may_not():
    p = JsonSchemaPrefix({"type": "integer"})
    assert p.feed(b"12") and p.complete and p.more  # "12" is whole, but "123" would be too
    assert not p.feed(b".5")  # not an integer
    q = JsonSchemaPrefix(PERSON)
    assert q.feed(b'{"name": "A", "age": 1, "role": 7}') and q.complete and not q.more
    assert not JsonSchemaPrefix(PERSON).feed(b'{"name": "A", "age": 1}}')  # "role" is required


@pytest.mark.parametrize("schema,word", [({"type": "array", "uniqueItems": True}, "uniqueItems"),
                                         ({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties"),
                                         ({"if": {"type": "object"}}, "'if'"),
                                         ({"type": "objekt"}, "type"),
                                         ({"$ref": "#/$defs/missing"}, "points at nothing"),
                                         ({"properties": {"a": {"not": {}}}}, "not")])
def test_keywords_that_are_not_enforced_are_refused_by_name(schema, word):
    with pytest.raises(NinferError, match=word):
        check_schema(schema)


@pytest.fixture(scope="module")
def llm():
    from ninfer import LLM

    return LLM(progress=False)


@pytest.mark.parametrize("temperature,seed", [(0.0, None), (0.8, 4), (1.2, 9)])
def test_the_real_model_answers_a_document_valid_against_the_schema(llm, temperature, seed):
    from ninfer import SamplingParams

    params = SamplingParams(temperature=temperature, seed=seed, max_tokens=200, json_schema=PERSON)
    assert params.response_format == "json_schema"
    out = llm.chat([{"role": "user", "content": "Describe a person who has a cat, in JSON."}], params)
    assert out.finish_reason == "stop", out.text
    jsonschema.validate(json.loads(out.text), PERSON)
    assert out.token_ids[-1] in llm.eos_token_ids


def test_sampling_params_check_the_schema():
    from ninfer import SamplingParams

    with pytest.raises(NinferError, match="uniqueItems"):
        SamplingParams(json_schema={"type": "array", "uniqueItems": True})
    with pytest.raises(NinferError, match="needs json_schema"):
        SamplingParams(response_format="json_schema")
    with pytest.raises(NinferError, match="ignore_eos"):
        SamplingParams(json_schema=True, ignore_eos=True)


@pytest.mark.parametrize("name", list(VALID))
def test_the_incremental_parse_agrees_with_a_parse_from_scratch(name):
    """JsonSchemaPrefix remembers the results of values closed in the kept text; every try, kept or refused
    (refused tries must leave nothing behind), must get what a fresh parse of the whole text gets."""
    rng = random.Random(zlib.crc32(b"inc" + name.encode()))
    schema = SCHEMAS[name]
    pieces = list('{}[]",:0123456789-.e truefalsnul\\ab') + ['"name"', '"kind"', '"v"', ": ", ", "]
    tries = kept = 0
    for doc in VALID[name]:
        for text in (json.dumps(doc), json.dumps(doc, indent=1)):
            p = JsonSchemaPrefix(schema)
            data = text.encode()
            pos = 0
            while pos < len(data):
                for _ in range(rng.randint(0, 3)):  # tries that are mostly refused, interleaved with the document
                    junk = rng.choice(pieces).encode()
                    complete, more = _Parse(schema, p.text + junk).root()
                    before = p.text
                    assert p.feed(junk) == (complete or more), (text, before, junk)
                    if p.text != before:
                        assert (p.complete, p.more) == (complete, more)
                        kept += 1
                    tries += 1
                step = rng.randint(1, 4)
                complete, more = _Parse(schema, p.text + data[pos:pos + step]).root()
                assert p.feed(data[pos:pos + step]) == (complete or more)
                if complete or more:
                    assert (p.complete, p.more) == (complete, more)
                pos += step
    assert tries > 20 and kept > 5


@pytest.mark.parametrize("schema,word", [
    ({"type": "object", "properties": {"a": {}}, "anyOf": [{"properties": {"b": {}}}]}, "'properties'"),
    ({"type": "string", "oneOf": [{"type": "integer"}]}, "'type'"),
    ({"$ref": "#/$defs/x", "minLength": 2, "$defs": {"x": {"type": "string", "minLength": 1}}},
     "'minLength' beside its"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "'type'"),
    # additionalProperties counts only the properties beside it: merged with properties from another part, it would
    # let them through
    ({"additionalProperties": False, "allOf": [{"properties": {"a": {}}}]}, "'additionalProperties'"),
    ({"additionalProperties": False, "anyOf": [{"properties": {"a": {}}}, {"type": "object"}]}, "'additionalProperties'"),
    ({"prefixItems": [{"type": "string"}], "allOf": [{"items": False}]}, "'items'"),
])
def test_keywords_that_would_override_each_other_are_refused(schema, word):
    """A keyword both beside an anyOf / oneOf and inside an alternative (or beside a $ref) used to be overridden
    by one of the two silently."""
    with pytest.raises(NinferError, match=word):
        check_schema(schema)


def test_pydantic_discriminated_unions_are_taken():
    """pydantic's discriminated unions: oneOf of $refs with an OpenAPI "discriminator" annotation."""
    schema = {"$defs": {"Cat": {"type": "object", "properties": {"pet": {"const": "cat"}, "lives": {"type": "integer"}},
                                "required": ["pet", "lives"]},
                        "Dog": {"type": "object", "properties": {"pet": {"const": "dog"}}, "required": ["pet"]}},
              "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
              "discriminator": {"propertyName": "pet", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}}
    check_schema(schema)
    assert _fed(schema, b'{"pet": "cat", "lives": 9}') == (True, True)
    assert _fed(schema, b'{"pet": "dog"}') == (True, True)
    assert not _fed(schema, b'{"pet": "cat"}')[1]


@pytest.mark.parametrize("name,texts", [
    ("one", ['{"a": 1, "b": "s"}', '"x"', '"yy"', '"zzz"', '5', '6', '{"a": 1}', '{"b": "s"}', '""', '"abc"']),
    ("counted", ['{}', '{"a": 1}', '{"a": 1, "b": true}', '{"a": 1, "b": true, "c": false}', '{"b": 1}']),
    ("merged", ['{"a": "x"}', '{"a": "xyzab"}', '{"a": "xy"}', '{"b": 1}', '{"a": "ab", "b": 6}', '{"a": "ab", "b": 5}',
                '{"a": "ab", "c": 1}', '[1]']),
    ("beside", ['{"e": 1}', '{"e": null}', '{"e": "a"}', '{"c": 1}', '{"c": 3}', '{"s": "a"}', '{"n": 2}',
                '{"n": 1}', '{"n": 3}', '{"n": 4}']),
])
def test_oneof_and_keywords_beside_enum_const_and_anyof_agree_with_the_reference(name, texts):
    """The cases the mutations rarely reach: what two oneOf alternatives both accept, an enum value of another
    type, const and enum together; each verdict (a whole document or not) is jsonschema's."""
    schema = SCHEMAS[name]
    verdicts = []
    for text in texts:
        ref = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        ok, complete = _fed(schema, text.encode())
        assert (ok and complete) == ref, text
        verdicts.append(ref)
    assert any(verdicts) and not all(verdicts)


BOUNDED = [{"type": "integer", "minimum": 3, "maximum": 120}, {"type": "integer", "exclusiveMaximum": 0},
           {"type": "integer", "minimum": -7.5, "exclusiveMaximum": 1000},
           {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2},
           {"type": "number", "minimum": 0.25, "exclusiveMaximum": 0.5}, {"type": "number", "maximum": -100},
           {"type": ["number", "null"], "exclusiveMinimum": 99.99}, {"type": "number", "multipleOf": 0.25},
           {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 30},
           {"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "maximum": 2.5},
           {"type": "integer", "multipleOf": 2.5}]


def _valid_exactly(schema, text: str | bytes) -> bool:
    """jsonschema's verdict, except multipleOf in exact decimal arithmetic (jsonschema divides floats: 2.3 is no
    multiple of 0.01 there)."""
    from fractions import Fraction

    rest = {k: v for k, v in schema.items() if k != "multipleOf"}
    value = json.loads(text)
    if not jsonschema.Draft202012Validator(rest).is_valid(value):
        return False
    if "multipleOf" not in schema or value is None:
        return True
    return Fraction(text.decode() if isinstance(text, bytes) else text) % Fraction(str(schema["multipleOf"])) == 0


@pytest.mark.parametrize("schema", BOUNDED, ids=[json.dumps(s) for s in BOUNDED])
def test_bounded_numbers_never_dead_end_and_agree_with_the_reference(schema):
    """minimum / maximum / exclusive*: random walks over the characters the parse lets through never reach a text
    that can neither end nor go on, and every text it calls whole is one jsonschema validates; numbers the
    reference takes, written without an exponent, are taken at every prefix."""
    rng = random.Random(zlib.crc32(json.dumps(schema).encode()))
    alphabet = [bytes([c]) for c in b"-.0123456789e"] + [b"null"]
    whole = 0
    for _ in range(300):
        p = JsonSchemaPrefix(schema)
        for _ in range(24):
            fits = [c for c in alphabet if _Parse(schema, p.text + c).root() != (False, False)]
            assert fits or p.complete, p.text  # no dead end
            if p.complete and (not fits or rng.random() < 0.25):
                break
            assert p.feed(rng.choice(fits))
        if p.complete:
            assert _valid_exactly(schema, p.text), p.text
            whole += 1
    assert whole > 100
    for _ in range(300):
        v = rng.choice([rng.randint(-200, 200), round(rng.uniform(-3, 3), rng.randint(0, 4)), rng.uniform(99, 101)])
        text = json.dumps(v)
        if "e" in text or ("." in text and schema["type"] == "integer"):  # (ninfer writes integers as integers)
            continue
        if not _valid_exactly(schema, text):
            continue
        assert _fed(schema, text.encode()) == (True, True), text


def test_impossible_or_inexpressible_counts_and_multiples_are_refused():
    with pytest.raises(NinferError, match="no object has"):
        check_schema({"type": "object", "minProperties": 3, "maxProperties": 2})
    with pytest.raises(NinferError, match="no object has"):
        check_schema({"type": "object", "minProperties": 2, "properties": {"a": {}}, "additionalProperties": False})
    with pytest.raises(NinferError, match="not short decimals"):
        check_schema({"type": "number", "multipleOf": 1e-20})
    with pytest.raises(NinferError, match="above 0"):
        check_schema({"type": "number", "multipleOf": 0})


def test_bounds_that_leave_no_number_are_refused():
    with pytest.raises(NinferError, match="no number is within its bounds"):
        check_schema({"type": "integer", "minimum": 1.2, "maximum": 1.8})
    with pytest.raises(NinferError, match="must be a number"):
        check_schema({"type": "number", "minimum": "3"})


def test_a_pydantic_models_schema_is_taken_and_the_real_model_answers_one_it_validates(llm):
    """What an app sends: pydantic's own JSON Schema of a model with bounds (ge / lt / gt / le), lengths, a pattern, an
    optional field (anyOf with null), a discriminated union (oneOf of $refs with a discriminator) and Literal consts;
    the answer must pass pydantic's own validation. extra="forbid" (additionalProperties false), as OpenAI's strict
    structured outputs require: with extra keys allowed the 135M model runs on inventing keys until max_tokens."""
    from typing import Annotated, Literal

    from pydantic import BaseModel, ConfigDict, Field

    from ninfer import SamplingParams

    class Cat(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kind: Literal["cat"]
        lives: int = Field(ge=0, le=9)

    class Dog(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kind: Literal["dog"]
        good: bool

    class Owner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = Field(min_length=2, max_length=20, pattern=r"^[A-Z][a-z]+( [A-Z][a-z]+)?$")
        age: int = Field(ge=0, lt=130)
        height_m: float | None = Field(default=None, gt=0, le=3)
        pets: list[Annotated[Cat | Dog, Field(discriminator="kind")]] = Field(max_length=2)

    schema = Owner.model_json_schema()
    check_schema(schema)
    params = SamplingParams(temperature=1.0, seed=5, max_tokens=160, json_schema=schema)
    out = llm.chat([{"role": "user", "content": "An owner of a cat and a dog, in JSON."}], params)
    assert out.finish_reason == "stop", out.text
    Owner.model_validate_json(out.text)


PATTERNS = [r"^\d{4}-\d{2}-\d{2}$", r"cat", r"^[A-Z][a-z]+( [A-Z][a-z]+)*$", r"^(?:a|bc)+$", r"^[^aeiou\s]{2,3}$",
            r"(x\.y|z)$", r"^\w+@\w+\.(com|org)$", r"^(ab?){2}c*?$", r"^.\t\\$", r"^[\u00e0-\u00ff-]+$", r"\d",
            r"^.{2}$"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_agree_with_python_re_on_random_strings(pattern):
    """A string is whole exactly when Python's re (jsonschema's own check; re.ASCII, as ECMA-262's \\d \\w are
    ASCII) finds the pattern in it; fed a byte at a time, so escapes and UTF-8 sequences end mid-character."""
    import re

    rng = random.Random(zlib.crc32(pattern.encode()))
    schema = {"type": "string", "pattern": pattern}
    chars = list("abcxyzAB019-.@ \t\\\u00e0\u00e9\u00ff\u4e2d\U0001F600") + ["com", "org", "cat", "2024-", "01-", "Ann"]
    agree = {True: 0, False: 0}
    for _ in range(400):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 6)))
        ref = re.search(pattern, text, re.ASCII) is not None
        doc = json.dumps(text, ensure_ascii=rng.random() < 0.3).encode()
        ok, complete = _fed(schema, doc)
        assert (ok and complete) == ref, (pattern, text)
        agree[ref] += 1
    assert agree[False] > 10


@pytest.mark.parametrize("schema", [{"type": "string", "pattern": r"^\d{4}-\d{2}$"},
                                    {"type": "string", "pattern": r"^[a-c]+$", "minLength": 3, "maxLength": 5},
                                    {"type": "string", "pattern": r"^(ab)*$", "maxLength": 5},
                                    {"type": "string", "pattern": r"z", "minLength": 4},
                                    {"type": "string", "pattern": r"^[\u00e0-\u00ff]+\u4e2d?$", "maxLength": 3}])
def test_patterned_strings_never_dead_end(schema):
    """Random walks over the pieces the parse lets through (escapes and UTF-8 bytes one at a time): never a text that
    can neither end nor go on, even where the lengths and the pattern both bind; each whole text is valid."""
    rng = random.Random(zlib.crc32(json.dumps(schema).encode()))
    pieces = [bytes([c]) for c in b'"abcdefz0123456789-\\nu'] + [b"\xc3", b"\xa0", b"\xe4", b"\xb8", b"\xad"]
    whole = 0
    for _ in range(200):
        p = JsonSchemaPrefix(schema)
        assert p.feed(b'"')
        for _ in range(40):
            fits = [c for c in pieces if _Parse(schema, p.text + c).root() != (False, False)]
            assert fits or p.complete, p.text
            if p.complete:
                break
            assert p.feed(rng.choice(fits))
        if p.complete:
            jsonschema.validate(json.loads(p.text), schema)
            whole += 1
    assert whole > 50


@pytest.mark.parametrize("pattern,word", [(r"^(?=a)", "look-around"), (r"(a)\1", r"\\1"), (r"\bword", r"\\b"),
                                          (r"\p{L}", r"\\p"), (r"a^b", "'\\^'"), (r"^a|b$", "top-level"),
                                          (r"a{2,1}", "maximum below"), (r"[b-a]", "out of order"), (r"(a", "unclosed")])
def test_patterns_beyond_the_subset_are_refused_by_name(pattern, word):
    with pytest.raises(NinferError, match=word):
        check_schema({"type": "string", "pattern": pattern})


def test_json_then_takes_the_document_then_exactly_the_text_in_any_cut():
    """JsonThen (SamplingParams.json_then, the server's forced tool calls): a document, optional whitespace, then the
    text, however the bytes are cut into tokens (a token may hold the document's end and the text's start)."""
    from ninfer import SamplingParams
    from ninfer.engine.json_schema import JsonThen

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    for whole in (b'{"n": 12}</tool_call>', b'{"n": 12}\n</tool_call>'):
        for step in range(1, len(whole) + 1):
            p = JsonThen(schema, "</tool_call>")
            for i in range(0, len(whole), step):
                assert p.feed(whole[i:i + step]), (whole, step)
                assert p.complete == (i + step >= len(whole)) and p.more != p.complete
    p = JsonThen(schema, "</tool_call>")
    assert p.feed(b'{"n": 1') and not p.feed(b"}</x") and not p.feed(b"<") and p.feed(b"2}") and not p.complete
    assert not p.feed(b"x") and p.feed(b"</tool_call>") and p.complete and not p.feed(b" ")
    assert not JsonThen(schema, "</tool_call>").feed(b'{"m": 1}')
    with pytest.raises(NinferError, match="json_then"):
        SamplingParams(json_then="</tool_call>")
