"""The Anthropic SDK against a real `ninfer serve` on the default model, plus the message conversion."""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx
import msgspec
import pytest
from test_server_harness import Server, engine_tokenizer_and_template

from ninfer.chat.tool_parsers import ToolCallDelta
from ninfer_server.anthropic_api import CountRequest, _message_frames, _messages, signature
from ninfer_server.generation import Event

KEY = "anthropic-key"
MSGS = [{"role": "user", "content": "Hi"}]
GREEDY = {"temperature": 0}  # this SDK has no temperature argument; the server still takes it


@pytest.fixture(scope="module")
def server():
    s = Server("--served-model-name", "smol", api_key=KEY)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=120)


def test_stream_and_non_stream_agree_usage_and_count_tokens(client):
    full = client.messages.create(model="smol", max_tokens=40, messages=MSGS, extra_body=GREEDY)
    with client.messages.stream(model="smol", max_tokens=40, messages=MSGS, extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    assert full.content[0].type == "text" and full.content[0].text
    assert final.content[0].text == full.content[0].text
    assert full.stop_reason == final.stop_reason == "end_turn"
    assert final.usage.output_tokens == full.usage.output_tokens > 0
    counted = client.messages.count_tokens(model="smol", messages=MSGS).input_tokens
    tok, template = engine_tokenizer_and_template()
    assert full.usage.input_tokens == final.usage.input_tokens == counted
    assert counted == len(tok.encode(template.render(MSGS, add_generation_prompt=True)))


def test_event_order_on_the_wire(server):
    body = {"model": "smol", "max_tokens": 6, "messages": MSGS, "stream": True, "temperature": 0}
    with httpx.stream("POST", server.url + "/v1/messages?beta=true", json=body, timeout=120,
                      headers={"x-api-key": KEY, "anthropic-beta": "made-up-feature-2099-01-01"}) as r:
        assert r.status_code == 200
        events = [line[len("event: "):] for line in r.iter_lines() if line.startswith("event: ")]
    names = [e for e in events if e != "ping"]
    assert names[0] == "message_start" and names[1] == "content_block_start"
    assert set(names[2:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "ping" in events


def test_system_string_or_blocks_and_stop_sequences(client):
    as_text = client.messages.count_tokens(model="smol", system="Be brief.", messages=MSGS).input_tokens
    as_blocks = client.messages.count_tokens(model="smol", messages=MSGS,
                                             system=[{"type": "text", "text": "Be brief."}]).input_tokens
    tok, template = engine_tokenizer_and_template()
    with_system = [{"role": "system", "content": "Be brief."}] + MSGS
    assert as_text == as_blocks == len(tok.encode(template.render(with_system, add_generation_prompt=True)))
    full = client.messages.create(model="smol", max_tokens=40, messages=MSGS, extra_body=GREEDY)
    text = full.content[0].text
    word = text.split()[1]
    cut = client.messages.create(model="smol", max_tokens=40, messages=MSGS, extra_body=GREEDY,
                                 stop_sequences=[word])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == word
    assert cut.content[0].text == text[: text.index(word)]
    short = client.messages.create(model="smol", max_tokens=2, messages=MSGS, extra_body=GREEDY)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 2


def test_forced_tool_use(client):
    tools = [{"name": "get_weather", "description": "Weather for a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    kw = dict(model="smol", max_tokens=24, extra_body=GREEDY, tools=tools,
              tool_choice={"type": "tool", "name": "get_weather"},
              messages=[{"role": "user", "content": "Weather in Paris?"}])
    full = client.messages.create(**kw)
    use = [b for b in full.content if b.type == "tool_use"]
    assert use and use[0].name == "get_weather" and isinstance(use[0].input, dict)
    assert use[0].id.startswith("toolu_")  # Anthropic's spelling of a tool-use id
    assert full.stop_reason in ("tool_use", "max_tokens")
    with client.messages.stream(**kw) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == [b.type for b in full.content]
    # "any" with one tool names it, so the call cannot name something else
    anyone = client.messages.create(**{**kw, "tool_choice": {"type": "any"}})
    assert [b.name for b in anyone.content if b.type == "tool_use"] == ["get_weather"]
    # "any" among several: the call names one of them (session 21; the name was free before)
    two = tools + [{"name": "get_local_time", "description": "Local time in a city",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    several = client.messages.create(**{**kw, "max_tokens": 40, "tools": two, "tool_choice": {"type": "any"},
                                        "messages": [{"role": "user", "content": "Tell me a joke."}]})
    names = [b.name for b in several.content if b.type == "tool_use"]
    assert names and names[0] in {"get_weather", "get_local_time"}, several.content


def test_a_final_assistant_message_is_a_prefill_the_answer_continues(server, client):
    """As Anthropic's API: the answer goes on from the prefill's last character (and does not repeat it), as a
    plain completion of the same rendered text would."""
    start = "The capital of France is"
    msgs = [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": start}]
    r = client.messages.create(model="smol", max_tokens=8, messages=msgs, extra_body=GREEDY)
    tok, template = engine_tokenizer_and_template()
    rendered = template.render(msgs, add_generation_prompt=False)
    prefix = rendered[:rendered.rindex(start) + len(start)]
    ref = httpx.post(server.url + "/v1/completions", headers={"x-api-key": KEY}, timeout=60, json={
        "model": "smol", "prompt": tok.encode(prefix), "max_tokens": 8, "temperature": 0}).json()
    assert r.content[0].text == ref["choices"][0]["text"] and "Paris" in r.content[0].text
    assert r.usage.input_tokens == len(tok.encode(prefix))
    assert client.messages.count_tokens(model="smol", messages=msgs).input_tokens == len(tok.encode(prefix))


@pytest.mark.parametrize("body,status,kind", [
    (b'{"model": "smol", "max_tokens": 5, "messages": [', 400, "invalid_request_error"),
    (b'{"model": "smol", "messages": [{"role": "user", "content": "hi"}]}', 400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": "5", "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 99999999, "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
    (b'{"model": "claude-9", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}', 404,
     "not_found_error"),
    (b'{"model": "smol", "max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]}', 400,
     "invalid_request_error"),
    # each of these was a 500 (a traceback in the server) before session 20
    (b'{"model": "smol", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
     400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "system": [{"type": "text", "text": null}], "messages": '
     b'[{"role": "user", "content": "hi"}]}', 400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", '
     b'"tool_use_id": "t", "content": {"a": 1}}]}]}', 400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", '
     b'"tool_use_id": "t", "content": ["plain"]}]}]}', 400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
     b'"content": [{"type": "thinking", "thinking": null}]}, {"role": "user", "content": "?"}]}', 400,
     "invalid_request_error"),
    # looser than the API before session 20 (answered 200, or named the wrong problem)
    (b'{"model": "smol", "max_tokens": 5, "tool_choice": {"type": "tool"}, "tools": [{"name": "f", '
     b'"input_schema": {"type": "object"}}], "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "tool_choice": {"type": "any"}, "messages": '
     b'[{"role": "user", "content": "hi"}]}', 400, "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": 5, "temperature": 5, "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
    (b'{"model": "smol", "max_tokens": -1, "messages": [{"role": "user", "content": "hi"}]}', 400,
     "invalid_request_error"),
])
def test_bad_input_gets_the_right_status_and_shape_then_good_requests_work(server, client, body, status, kind):
    r = httpx.post(server.url + "/v1/messages", content=body, headers={"x-api-key": KEY}, timeout=60)
    assert r.status_code == status, r.text
    assert "Field required" not in r.text or b'"max_tokens"' not in body  # a given max_tokens is never "missing"
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind
    assert r.json()["error"]["message"].endswith(".")
    assert client.messages.create(model="smol", max_tokens=2, messages=MSGS).content


def test_models_in_the_anthropic_shape(client):
    models = list(client.models.list())
    assert [m.id for m in models] == ["smol"] and models[0].type == "model"
    assert models[0].display_name == "smol" and models[0].created_at.year >= 2026
    assert client.models.retrieve("smol").id == "smol"


def test_sdk_error_types(server, client):
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.url, api_key="nope", max_retries=0).messages.create(
            model="smol", max_tokens=2, messages=MSGS)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-9", max_tokens=2, messages=MSGS)
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="smol", max_tokens=2, messages=[{"role": "user", "content": "word " * 3000}])
    assert "context" in str(e.value)


def test_forced_tool_use_input_is_valid_against_the_input_schema(client):
    """tool_choice tool / any: the input is written under the tool's input_schema (enums, bounds, required,
    additionalProperties false) and validates; before this session only the name was forced."""
    import jsonschema

    schema = {"type": "object", "required": ["city", "days"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                             "days": {"type": "integer", "minimum": 1, "maximum": 5}}}
    tools = [{"name": "forecast", "description": "Weather forecast", "input_schema": schema}]
    for choice in ({"type": "tool", "name": "forecast"}, {"type": "any"}):
        r = client.messages.create(model="smol", max_tokens=60, tools=tools, tool_choice=choice,
                                   extra_body={"temperature": 1.0, "seed": 3},
                                   messages=[{"role": "user", "content": "How will my trip be?"}])
        use = [b for b in r.content if b.type == "tool_use"]
        assert r.stop_reason == "tool_use" and len(use) == 1, r.content
        jsonschema.validate(use[0].input, schema)


def test_tool_use_and_tool_result_become_template_messages():
    req = msgspec.convert(dict(model="m", system=[{"type": "text", "text": "sys"}], messages=[
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "call it", "signature": "x"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
            {"type": "text", "text": "Thanks"}]}]), type=CountRequest)
    assert _messages(req) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "call it", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "user", "content": "Thanks"}]


def test_stream_frames_for_thinking_text_and_tool_use():
    async def events():
        for ev in [Event("reasoning", "Let me "), Event("reasoning", "think."), Event("content", "Sure."),
                   Event("tool", tool=ToolCallDelta(0, "call_1", "get_weather")),
                   Event("tool", tool=ToolCallDelta(0, arguments='{"city": ')),
                   Event("tool", tool=ToolCallDelta(0, arguments='"Paris"}')),
                   Event("finish", finish_reason="tool_calls", usage={"prompt_tokens": 5, "completion_tokens": 9})]:
            yield ev

    async def frames():
        return [f async for f in _message_frames({"id": "msg_1", "type": "message", "role": "assistant",
                                                  "model": "m"}, events(), 5)]

    parsed = []
    for f in asyncio.run(frames()):
        kind, data = f.decode().split("\n")[:2]
        parsed.append((kind[len("event: "):], json.loads(data[len("data: "):])))
    names = [k for k, _ in parsed if k != "ping"]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta",
                     "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]
    deltas = [d for k, d in parsed if k == "content_block_delta"]
    assert deltas[2]["delta"] == {"type": "signature_delta", "signature": signature("Let me think.")}
    starts = [d["content_block"] for k, d in parsed if k == "content_block_start"]
    assert [s["type"] for s in starts] == ["thinking", "text", "tool_use"] and starts[2]["name"] == "get_weather"
    assert "".join(d["delta"].get("partial_json", "") for d in deltas) == '{"city": "Paris"}'
    end = [d for k, d in parsed if k == "message_delta"][0]
    assert end["delta"]["stop_reason"] == "tool_use" and end["usage"]["output_tokens"] == 9
