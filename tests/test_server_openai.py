"""The OpenAI SDK against a real `ninfer serve` on the default model (SmolLM2-135M, CPU)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest
from test_server_harness import Server, engine_tokenizer_and_template

KEY = "test-key"
MSGS = [{"role": "user", "content": "Name three colors."}]
LONG = 460  # tokens that fill the 512-token context: seconds of work even on a fast CPU


@pytest.fixture(scope="module")
def server():
    s = Server("--max-queue", "1", "--keepalive", "0.3", "--served-model-name", "smol",
               "--served-model-name", "alias", api_key=KEY)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def test_health_is_open_and_everything_else_needs_the_key(server, client):
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    with pytest.raises(openai.AuthenticationError) as e:
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
    assert e.value.body["code"] == "invalid_api_key"  # the SDK parsed {"error": {...}}
    assert httpx.get(server.url + "/metrics").status_code == 401
    assert httpx.get(server.url + "/v1/models", headers={"x-api-key": KEY}).status_code == 200
    assert [m.id for m in client.models.list()] == ["smol", "alias"]


def test_stream_and_non_stream_agree_and_usage_matches_the_tokenizer(client):
    full = client.chat.completions.create(model="smol", messages=MSGS, max_tokens=12, temperature=0)
    chunks = list(client.chat.completions.create(model="alias", messages=MSGS, max_tokens=12, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content and text
    # the role comes once, first; one final usage chunk with no choices, only because it was asked for
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    assert chunks[-1].choices == [] and all(c.choices for c in chunks[:-1])
    assert chunks[-1].usage.model_dump() == full.usage.model_dump()
    tok, template = engine_tokenizer_and_template()
    assert full.usage.prompt_tokens == len(tok.encode(template.render(MSGS, add_generation_prompt=True)))
    fin = full.choices[0].finish_reason
    assert full.usage.completion_tokens == 12 if fin == "length" else 0 < full.usage.completion_tokens <= 12
    assert full.usage.total_tokens == full.usage.prompt_tokens + full.usage.completion_tokens
    plain = list(client.chat.completions.create(model="smol", messages=MSGS, max_tokens=3, stream=True))
    assert all(c.usage is None and c.choices for c in plain)


def test_sdk_stream_helper_and_logprobs(client):
    # the helper refuses a "length" finish, so ask for an answer that ends by itself
    with client.chat.completions.stream(model="smol", messages=[{"role": "user", "content": "Hi"}],
                                        max_tokens=40, temperature=0, logprobs=True, top_logprobs=2,
                                        stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "stop" and choice.message.content
    lps = choice.logprobs.content
    assert len(lps) == final.usage.completion_tokens  # one entry per generated token, the EOS included
    assert all(len(x.top_logprobs) == 2 and x.logprob <= 0 for x in lps)
    assert all(x.top_logprobs[0].logprob == x.logprob for x in lps)  # greedy picks the most likely token
    assert "".join(x.token for x in lps[:-1]) == choice.message.content


def test_completions_and_stop_strings(client):
    full = client.completions.create(model="smol", prompt="The capital of France is", max_tokens=10, temperature=0)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="smol", prompt="The capital of France is", max_tokens=10, temperature=0, stream=True) if c.choices)
    text = full.choices[0].text
    assert streamed == text and text.strip()
    word = text.split()[1] if len(text.split()) > 1 else text.split()[0]
    cut = client.completions.create(model="smol", prompt="The capital of France is", max_tokens=10,
                                    temperature=0, stop=[word])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[: text.index(word)]


def test_named_tool_choice_streams_the_name_first(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    kw = dict(model="smol", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
              tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=16, temperature=0)
    full = client.chat.completions.create(**kw)
    call = full.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and "<tool_call>" not in (full.choices[0].message.content or "")
    assert full.choices[0].finish_reason in ("tool_calls", "length")
    chunks = [c for c in client.chat.completions.create(**kw, stream=True) if c.choices]
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == "get_weather" and deltas[0].id
    assert "".join(d.function.arguments or "" for d in deltas) == call.function.arguments
    assert chunks[-1].choices[0].finish_reason == full.choices[0].finish_reason
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(**{**kw, "tool_choice": {"type": "function", "function": {"name": "nope"}}})


BAD = [  # (raw JSON body, status, param the error names or None)
    (b'{"model": "smol", "messages": [', 400, None),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}', 400, "max_tokens"),
    (b'{"model": "smol"}', 400, "messages"),
    (b'{"messages": [{"role": "user", "content": "hi"}]}', 400, None),
    (b'{"model": "smol", "messages": [{"role": "wizard", "content": "hi"}]}', 400, "messages.0.role"),
    (b'{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}', 404, "model"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}', 400, "max_tokens"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000000}', 400, "max_tokens"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "n": 2}', 400, "n"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "temperature": -1}', 400, None),
    (b'[1, 2]', 400, None),
    # each of these was a 500 (a traceback in the server) before session 20
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"tools": []}}',
     400, "chat_template_kwargs"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": '
     b'[{"id": "c", "type": "function", "function": "oops"}]}, {"role": "user", "content": "?"}]}',
     400, "messages.1.tool_calls.0"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "seed": 18446744073709551621}', 400, None),
    # looser than the API before session 20 (answered 200)
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}',
     400, "tool_choice"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}', 400, "top_logprobs"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "temperature": 5}', 400, "temperature"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}',
     400, "stream_options"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", '
     b'"json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}}', 400, "response_format"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", '
     b'"json_schema": {"name": "x", "schema": {"$ref": "#/$defs/nowhere"}}}}', 400, "response_format"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}}',
     400, "response_format"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}, '
     b'"tools": [{"type": "function", "function": {"name": "f"}}]}', 400, "response_format"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "bogus"}}',
     400, "response_format"),
]


@pytest.mark.parametrize("body,status,param", BAD)
def test_bad_input_gets_the_right_status_and_shape_then_good_requests_work(server, client, body, status, param):
    r = httpx.post(server.url + "/v1/chat/completions", content=body,
                   headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}, timeout=60)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"].endswith(".")
    assert err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param
    ok = client.chat.completions.create(model="smol", messages=MSGS, max_tokens=2)
    assert ok.choices[0].message.content is not None


def test_sdk_error_types_and_oversized_prompt(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-9", messages=MSGS, max_tokens=2)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "word " * 600}],
                                       max_tokens=2)
    assert "context" in e.value.message and e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="smol", prompt="word " * 600, max_tokens=2)


def _stream_lines(server, max_tokens, out: list, stop: threading.Event):
    body = {"model": "smol", "messages": MSGS, "max_tokens": max_tokens, "stream": True, "temperature": 0,
            "ignore_eos": True}  # runs to max_tokens unless it is stopped
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {KEY}"}) as r:
        out.append(r.status_code)
        for line in r.iter_lines():
            out.append(line)
            if stop.is_set():
                return  # leaving the block closes the connection: the client has gone


def test_queue_bound_429_keepalive_comments_and_disconnect_stops_generation(server, client):
    stop = threading.Event()
    first, second = [], []
    t1 = threading.Thread(target=_stream_lines, args=(server, LONG, first, stop))
    t1.start()
    while len(first) < 3:  # the first request is generating
        time.sleep(0.05)
    t2 = threading.Thread(target=_stream_lines, args=(server, LONG, second, stop))
    t2.start()
    while server.metrics(KEY)["queued"] < 1:  # the second waits in the queue (bound 1)
        time.sleep(0.05)
    with pytest.raises(openai.RateLimitError) as e:
        client.chat.completions.create(model="smol", messages=MSGS, max_tokens=2)
    assert e.value.code == "rate_limit_exceeded"
    time.sleep(0.8)
    assert ": keep-alive" in second  # the waiting stream hears from the server
    first_id = json.loads(first[1][len("data: "):])["id"]
    assert first_id.startswith("chatcmpl-")
    stop.set()
    t1.join(60)
    t2.join(60)
    m = server.wait_idle(KEY)
    cancelled = [r for r in m["recent"][-2:] if r["finish_reason"] == "cancelled"]
    assert len(cancelled) == 2, m["recent"]  # both stopped early, neither ran to its LONG tokens
    assert all(r["generated_tokens"] < LONG for r in cancelled)
    before = m["generated_tokens"]
    time.sleep(1.0)
    assert server.metrics(KEY)["generated_tokens"] == before  # nothing keeps generating for them

    # non-streaming: the client times out and goes; the engine stops that request too
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/chat/completions", timeout=2, headers={"x-api-key": KEY},
                   json={"model": "smol", "messages": MSGS, "max_tokens": LONG, "temperature": 0, "ignore_eos": True})
    m = server.wait_idle(KEY)
    assert m["recent"][-1]["finish_reason"] == "cancelled" and m["recent"][-1]["generated_tokens"] < LONG
    assert client.chat.completions.create(model="smol", messages=MSGS, max_tokens=2).choices


def test_serve_takes_the_kv_and_lm_head_formats_and_auto_context():
    s = Server("--kv-cache", "int8", "--lm-head", "int8", "--max-context", "auto")  # the last --max-context wins
    try:
        s.log.seek(0)
        started = s.log.read()
        assert "int8 KV, lm_head int8" in started and "context 8192 tokens" in started, started  # SmolLM2's limit
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)
        out = client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=16, temperature=0,
                                             messages=[{"role": "user", "content": "What is the capital of France?"}])
        assert "Paris" in out.choices[0].message.content
    finally:
        s.stop()


def test_logprobs_carry_each_tokens_bytes_and_ride_with_their_text(client):
    """A character that spans tokens (Japanese here) decodes to U+FFFD token by token, so the bytes are what
    rebuilds the text; streamed, a token's logprobs come in the chunk that carries its text."""
    kw = dict(model="smol", messages=[{"role": "user", "content": "Say: caf\u00e9 \u2615 \u65e5\u672c"}],
              max_tokens=12, temperature=0, logprobs=True, top_logprobs=1)
    full = client.chat.completions.create(**kw)
    text, lps = full.choices[0].message.content, full.choices[0].logprobs.content
    assert any(ord(c) > 0x3000 for c in text)  # the answer has characters of several bytes
    assert b"".join(bytes(x.bytes) for x in lps).decode() == text
    assert all(bytes(x.top_logprobs[0].bytes) == bytes(x.bytes) for x in lps)  # greedy: the top one is the pick
    chunks = [c for c in client.chat.completions.create(**kw, stream=True) if c.choices]
    streamed = [x for c in chunks if c.choices[0].logprobs for x in c.choices[0].logprobs.content]
    assert [x.bytes for x in streamed] == [x.bytes for x in lps]
    # (the second request's prompt may come from the prefix cache: the same tokens, logprobs to float rounding)
    assert [x.logprob for x in streamed] == pytest.approx([x.logprob for x in lps], abs=1e-4)
    for c in chunks[1:]:  # after the role chunk: no chunk of logprobs alone, unless it is the finish
        assert c.choices[0].delta.content or c.choices[0].finish_reason or not c.choices[0].logprobs


def test_models_retrieve_aliases_and_completions_echo(client):
    assert client.models.retrieve("alias").id == "alias"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-9")
    r = client.chat.completions.create(model="alias", messages=MSGS, max_tokens=2)
    assert r.model == "alias"  # the name asked for comes back
    prompt = "The capital of France is"
    plain = client.completions.create(model="smol", prompt=prompt, max_tokens=6, temperature=0, logprobs=1)
    echoed = client.completions.create(model="smol", prompt=prompt, max_tokens=6, temperature=0, logprobs=1,
                                       echo=True)
    assert echoed.choices[0].text == prompt + plain.choices[0].text
    lp = echoed.choices[0].logprobs
    # each generated token starts where the text before it ends
    assert [echoed.choices[0].text[o:].startswith(t) for o, t in zip(lp.text_offset, lp.tokens)] == [True] * 6
    assert lp.text_offset[0] == len(prompt)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="smol", prompt=prompt, max_tokens=6, temperature=0, echo=True, stream=True) if c.choices)
    assert streamed == echoed.choices[0].text


def test_continue_final_message_goes_on_from_the_assistants_text(client):
    """vLLM's continue_final_message: the answer continues the final assistant message, as a plain completion
    of the same rendered text would."""
    start = "The three colors are red,"
    msgs = MSGS + [{"role": "assistant", "content": start}]
    r = client.chat.completions.create(model="smol", messages=msgs, max_tokens=8, temperature=0,
                                       extra_body={"continue_final_message": True})
    tok, template = engine_tokenizer_and_template()
    rendered = template.render(msgs, add_generation_prompt=False)
    prefix = rendered[:rendered.rindex(start) + len(start)]
    ref = client.completions.create(model="smol", prompt=tok.encode(prefix), max_tokens=8, temperature=0)
    assert r.choices[0].message.content == ref.choices[0].text and ref.choices[0].text
    assert r.usage.prompt_tokens == len(tok.encode(prefix))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_required_tool_choice_among_several_tools_calls_one_of_them(client, temperature):
    """tool_choice "required" with several tools: the call names one of the tools given (before session 21 only
    the <tool_call> tag was forced and the name was free), through the official SDK, greedy and sampled."""
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        for n, d in (("get_weather", "Weather in a city"), ("get_local_time", "Local time in a city"))]
    r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Tell me a joke."}],
                                       tools=tools, tool_choice="required", max_tokens=60, temperature=temperature,
                                       seed=11)
    calls = r.choices[0].message.tool_calls
    assert calls and calls[0].function.name in {"get_weather", "get_local_time"}, r.choices[0].message


TRIP = {"type": "object", "required": ["city", "days", "unit"], "additionalProperties": False, "properties": {
    "city": {"type": "string", "enum": ["Paris", "London", "Tokyo"]}, "days": {"type": "integer", "minimum": 1,
                                                                              "maximum": 7},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "note": {"type": "string", "maxLength": 20}}}


@pytest.mark.parametrize("choice", ["named", "required"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_forced_tool_calls_have_arguments_valid_against_the_tools_schema(client, choice, temperature):
    """A forced call (a named function, or "required" among several) is written under the tool's parameters schema:
    the arguments parse and validate (jsonschema), the call is complete (finish_reason tool_calls) and only one is
    made. Before this session only the name was forced: a 135M model's arguments were free text."""
    import jsonschema

    tools = [{"type": "function", "function": {"name": "forecast", "description": "Weather forecast for a trip",
                                               "parameters": TRIP}},
             {"type": "function", "function": {"name": "get_local_time", "description": "Local time in a city",
                                               "parameters": {"type": "object", "required": ["city"],
                                                              "properties": {"city": {"type": "string",
                                                                                      "maxLength": 30}}}}}]
    tool_choice = {"type": "function", "function": {"name": "forecast"}} if choice == "named" else "required"
    r = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Plan my week away."}],
                                       tools=tools, tool_choice=tool_choice, max_tokens=80, temperature=temperature,
                                       seed=7)
    assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert calls[0].function.name in (["forecast"] if choice == "named" else by_name)
    jsonschema.validate(json.loads(calls[0].function.arguments), by_name[calls[0].function.name])


def test_json_schema_response_format_answers_a_valid_document(client):
    """response_format json_schema (OpenAI's structured outputs; before session 21 a 400): the answer validates
    against the schema by the jsonschema package, streamed or not."""
    import jsonschema

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                               "population": {"type": "integer"},
                                               "landmarks": {"type": "array", "items": {"type": "string"},
                                                             "maxItems": 3}},
              "required": ["city", "population", "landmarks"], "additionalProperties": False}
    kw = dict(model="smol", messages=[{"role": "user", "content": "Tell me about Paris."}], max_tokens=150,
              temperature=0, response_format={"type": "json_schema",
                                              "json_schema": {"name": "city", "schema": schema, "strict": True}})
    full = client.chat.completions.create(**kw)
    assert full.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(full.choices[0].message.content), schema)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**kw, stream=True)
                       if c.choices)
    assert streamed == full.choices[0].message.content


def test_the_sdks_parse_helper_gets_an_instance_of_the_pydantic_model(client):
    """What apps call: the openai SDK's chat.completions.parse(response_format=Model) turns a pydantic model into its
    strict JSON Schema (bounds, a pattern, a Literal const, an optional field, a nested model by $ref) and parses the
    answer back into the model; before this session the pattern and the bounds were a 400."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int = Field(ge=0, le=9)

    class Owner(BaseModel):
        name: str = Field(pattern=r"^[A-Z][a-z]+$")
        age: int = Field(ge=0, lt=130)
        height_m: float | None
        pets: list[Cat] = Field(max_length=2)

    r = client.chat.completions.parse(model="smol", messages=[{"role": "user", "content": "A cat owner, in JSON."}],
                                      response_format=Owner, max_tokens=120, temperature=0.7, seed=3)
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    owner = r.choices[0].message.parsed
    assert isinstance(owner, Owner) and 0 <= owner.age < 130 and all(0 <= c.lives <= 9 for c in owner.pets)


def test_json_mode_answers_one_json_object(client):
    """response_format json_object: the output is constrained to one JSON object (before session 20 the field was
    dropped and the answer was prose), streamed or not."""
    kw = dict(model="smol", messages=[{"role": "user", "content": "Describe a cat."}], max_tokens=120,
              temperature=0, response_format={"type": "json_object"})
    full = client.chat.completions.create(**kw)
    assert full.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(full.choices[0].message.content), dict)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**kw, stream=True)
                       if c.choices)
    assert streamed == full.choices[0].message.content


def test_out_of_vocabulary_token_ids_are_a_400_even_when_streaming(server):
    """The engine's own id check, made before the response starts (streamed, it was a 200 then an error event)."""
    for stream in (False, True):
        r = httpx.post(server.url + "/v1/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                       json={"model": "smol", "prompt": [1, 10 ** 7], "max_tokens": 2, "stream": stream})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
        assert "outside the vocabulary" in r.json()["error"]["message"]


def test_a_forced_calls_schema_keeps_each_tools_defs_where_its_refs_point():
    """Tool parameters made by pydantic carry $defs and "#/$defs/..." refs: under the call's schema they move to its
    root, so the refs still resolve; two tools defining one name differently leave the call unconstrained."""
    import jsonschema
    from pydantic import BaseModel

    from ninfer.engine.json_schema import JsonSchemaPrefix
    from ninfer_server.generation import _strict_call

    class Leg(BaseModel):
        city: str
        nights: int

    class Trip(BaseModel):
        legs: list[Leg]

    params = Trip.model_json_schema()
    assert "$defs" in params
    tools = [{"type": "function", "function": {"name": "plan", "parameters": params}},
             {"type": "function", "function": {"name": "noop"}}]
    schema = _strict_call(tools, None)
    call = {"name": "plan", "arguments": {"legs": [{"city": "Rome", "nights": 2}]}}
    jsonschema.validate(call["arguments"], params)
    p = JsonSchemaPrefix(schema)
    assert p.feed(json.dumps(call).encode()) and p.complete
    assert JsonSchemaPrefix(schema).feed(b'{"name": "noop", "arguments": {}}')
    assert not JsonSchemaPrefix(schema).feed(b'{"name": "noop", "arguments": {"x": 1}}')  # no parameters: {}
    other = {"$defs": {"Leg": {"type": "string"}}, "type": "object", "properties": {"leg": {"$ref": "#/$defs/Leg"}}}
    assert _strict_call(tools + [{"type": "function", "function": {"name": "other", "parameters": other}}],
                        None) is None
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert _strict_call([{"type": "function", "function": {"name": "tree", "parameters": tree}}], None) is None
    # a property named "properties" is a property, not the keyword: it is closed like any other object
    odd = {"type": "object", "properties": {"properties": {"type": "object", "properties": {"a": {"type": "integer"}}}}}
    schema = _strict_call([{"type": "function", "function": {"name": "odd", "parameters": odd}}], None)
    inner = schema["properties"]["arguments"]
    assert inner["additionalProperties"] is False and "additionalProperties" not in inner["properties"]
    assert inner["properties"]["properties"]["additionalProperties"] is False
