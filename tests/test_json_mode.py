"""JSON mode: the validator against Python's json module, and the real model's output through the engine."""

from __future__ import annotations

import json
import random

import pytest

from ninfer.engine.json_mode import MAX_WHITESPACE, JsonObjectPrefix


def _strict(text: str):
    """Python's json, without its NaN / Infinity extension: the RFC 8259 reference."""
    def no(c):
        raise ValueError(c)

    return json.loads(text, parse_constant=no)


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.choice([0, -0.5, 12, -3, 1e-7, 2.5e10, 123456789, 0.125])
    if kind in (2, 3, 4):
        return "".join(rng.choice(['a', ' ', '"', '\\', '\n', '\t', '\u00e9', '\u65e5', '/', '\u0001', 'z'])
                       for _ in range(rng.randrange(6)))
    if kind in (5, 6):
        tails = ["", '"', "\u00e9"]
        return {"k" + str(i) + rng.choice(tails): _value(rng, depth + 1) for i in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _documents(n: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        obj = {f"key{i}": _value(rng) for i in range(rng.randrange(5))}
        yield json.dumps(obj, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2, 4]),
                         separators=rng.choice([None, (",", ":"), (" , ", " : ")]))


def _accepts(data: bytes) -> tuple[bool, bool]:
    """(every byte fit, the object is complete)"""
    p = JsonObjectPrefix()
    for i in range(len(data)):
        if not p.feed(data[i:i + 1]):
            return False, False
    return True, p.complete


def test_every_prefix_of_a_json_object_fits_and_only_the_whole_is_complete():
    for doc in _documents(300):
        data = doc.encode()
        p = JsonObjectPrefix()
        for i in range(len(data)):
            assert not p.complete, doc
            assert p.feed(data[i:i + 1]), (doc, data[:i + 1])
        assert p.complete, doc
        assert not p.feed(b" ") and not p.feed(b"{")  # nothing after the object


def test_mutated_documents_agree_with_pythons_json():
    """A byte changed, dropped or repeated: the validator completes exactly the texts json.loads reads as an
    object."""
    rng = random.Random(1)
    checked = 0
    for doc in _documents(400, seed=2):
        data = bytearray(doc.encode())
        for _ in range(6):
            d = bytearray(data)
            i = rng.randrange(len(d))
            op = rng.randrange(3)
            if op == 0:
                d[i] = rng.choice(b'{}[]",:\\ 0123456789.eE+-truefalsn\x01\x7f')
            elif op == 1:
                del d[i]
            else:
                d.insert(i, d[i])
            try:
                ref = isinstance(_strict(d.decode("utf-8")), dict)
            except (ValueError, UnicodeDecodeError):
                ref = False
            fits, complete = _accepts(bytes(d))
            assert (fits and complete) == ref, (doc, bytes(d))
            checked += 1
    assert checked == 2400


@pytest.mark.parametrize("text,ok", [
    ("[1, 2]", False), ('"a"', False), ("3", False), ("{}", True), ('{"a": 01}', False), ('{"a": -}', False),
    ('{"a": 1.}', False), ('{"a": 1e}', False), ('{"a": 1e+5}', True), ('{"a": "\\x"}', False),
    ('{"a": "\\u12G4"}', False), ('{"a": "\\u12aF"}', True), ('{"a": tru}', False), ('{"a": [1,]}', False),
    ('{"a": 1,}', False), ('{,}', False), ('{"a" 1}', False), ('{"a": NaN}', False)])
def test_edge_cases(text, ok):
    fits, complete = _accepts(text.encode())
    assert (fits and complete) == ok


def test_long_whitespace_runs_are_refused():
    assert _accepts(b"{" + b" " * MAX_WHITESPACE + b"}") == (True, True)
    assert _accepts(b"{" + b"\n" * (MAX_WHITESPACE + 1) + b"}")[0] is False


@pytest.fixture(scope="module")
def llm():
    from ninfer import LLM

    return LLM(progress=False)


@pytest.mark.parametrize("prompt,temperature,seed", [
    ("Give me a JSON object describing a cat with name and age.", 0.0, None),
    ("Describe a dog in JSON.", 0.8, 3),
    ("Hi!", 0.0, None),  # a prompt that does not ask for JSON still gets an object
])
def test_the_real_model_answers_one_json_object(llm, prompt, temperature, seed):
    from ninfer import SamplingParams

    out = llm.chat([{"role": "user", "content": prompt}],
                   SamplingParams(temperature=temperature, seed=seed, max_tokens=120, response_format="json_object"))
    assert out.finish_reason == "stop", out.text
    assert isinstance(_strict(out.text), dict)
    assert out.token_ids[-1] in llm.eos_token_ids  # the turn ended with the object


def test_json_mode_refuses_ignore_eos():
    from ninfer import SamplingParams
    from ninfer.errors import NinferError

    with pytest.raises(NinferError, match="ignore_eos"):
        SamplingParams(response_format="json_object", ignore_eos=True)
    with pytest.raises(NinferError, match="response_format"):
        SamplingParams(response_format="yaml")


@pytest.mark.parametrize("temperature,seed", [(0.0, None), (0.9, 5)])
def test_starts_with_makes_the_output_begin_with_a_choice_then_lets_the_model_go_on(llm, temperature, seed):
    """SamplingParams.starts_with: the output begins with one of the choices (here ones the model would not write
    by itself), and from there on it is the model's own continuation: the same tokens as an unconstrained
    generation from the prompt plus the constrained tokens."""
    from ninfer import SamplingParams

    prompt = llm.render_chat([{"role": "user", "content": "What is the capital of France?"}])
    choices = ('{"name": "get_weather", "arguments": ', '{"name": "get_time", "arguments": ')
    plain = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=12))
    assert not any(plain.text.startswith(c) for c in choices)
    p = SamplingParams(temperature=temperature, seed=seed, max_tokens=30, starts_with=choices)
    out = llm.generate(prompt, p)
    chosen = [c for c in choices if out.text.startswith(c)]
    assert len(chosen) == 1, out.text
    ids = llm.tokenizer.encode(prompt)
    k = next(i for i in range(1, len(out.token_ids) + 1)  # the tokens that reached the choice's end
             if llm.tokenizer.decode(out.token_ids[:i]).startswith(chosen[0]))
    if temperature == 0:
        rest = llm.generate(ids + out.token_ids[:k], SamplingParams(temperature=0, max_tokens=30 - k))
        assert out.token_ids[k:] == rest.token_ids
    assert len(out.token_ids) > k  # the model went on past the choice


def test_starts_with_is_checked():
    from ninfer import SamplingParams
    from ninfer.errors import NinferError

    assert SamplingParams(starts_with="a").starts_with == ("a",)
    with pytest.raises(NinferError, match="starts_with"):
        SamplingParams(starts_with=("",))
    with pytest.raises(NinferError, match="starts_with"):
        SamplingParams(starts_with=("{",), response_format="json_object")
