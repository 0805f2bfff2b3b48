"""The server's plumbing, in process, with a scripted engine: recorded Qwen outputs through both APIs,
tool_choice prefill, mid-stream failures, and a worker that survives a failing request."""

from __future__ import annotations

import json

import pytest
from litestar.testing import TestClient

from ninfer.engine.generate import Chunk
from ninfer.errors import NinferError
from ninfer_server.app import create_app
from ninfer_server.common import ServerState
from ninfer_server.worker import EngineWorker

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
XML_CALL = ("I'll look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nS\u00e3o Paulo\n</parameter>\n"
            "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>")
THINK = "<think>\nThe user wants weather.\n</think>\n\n"


class CharTokenizer:
    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids if i)


class ScriptedLLM:
    """Writes ``script`` (text pieces; an exception is raised where it stands), then stops with EOS."""

    max_context, eos_token_ids, tokenizer = 4096, {0}, CharTokenizer()

    def __init__(self):
        self.script, self.xml, self.opens_think, self.prompts = [], False, False, []

    def render_chat(self, messages, tools=None, add_generation_prompt=True, enable_thinking=None, **kw):
        text = "".join(f"<|{m['role']}|>{m.get('content') or ''}" for m in messages)
        if tools:  # a Qwen3.5-like template teaches the XML form; a Qwen3-like one the JSON form
            text = "<tools>" + json.dumps(tools) + ("<function=NAME>" if self.xml else "<tool_call>") + text
        return text + "<|assistant|>" + ("<think>\n" if self.opens_think and enable_thinking is not False else "")

    def generate_stream(self, ids, params, cancel=None):
        self.prompts.append(self.tokenizer.decode(ids))
        self.params = params
        for piece in self.script:
            if isinstance(piece, Exception):
                raise piece
            yield Chunk(piece, [ord(c) for c in piece])
        yield Chunk("", [0], "stop", {})


@pytest.fixture()
def setup():
    llm = ScriptedLLM()
    state = ServerState(llm, EngineWorker(llm, 4), ["m"], None, 10.0)
    with TestClient(create_app(state)) as client:
        yield llm, client


def _split(text, n=7):
    return [text[i:i + n] for i in range(0, len(text), n)]


def _chat(client, **kw):
    return client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                     **kw})


def _sse_data(r):
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]


def test_recorded_tool_call_and_reasoning_through_openai(setup):
    llm, client = setup
    llm.script = _split(THINK + XML_CALL)
    msg = _chat(client, tools=TOOLS).json()["choices"][0]
    assert msg["finish_reason"] == "tool_calls"
    assert msg["message"]["reasoning_content"] == "The user wants weather." == msg["message"]["reasoning"]
    assert msg["message"]["content"] == "I'll look.\n"
    call = msg["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "S\u00e3o Paulo", "days": 2}
    chunks = _sse_data(_chat(client, tools=TOOLS, stream=True))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"] == calls[0]["id"]
    assert "".join(tc["function"]["arguments"] for tc in calls) == call["function"]["arguments"]
    assert "".join(d.get("content", "") for d in deltas) == "I'll look.\n"
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "The user wants weather."
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_recorded_tool_call_and_thinking_through_anthropic(setup):
    llm, client = setup
    llm.script = _split(THINK + XML_CALL, 5)
    tools = [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]
    body = {"model": "m", "max_tokens": 100, "tools": tools, "messages": [{"role": "user", "content": "hi"}]}
    msg = client.post("/v1/messages", json=body).json()
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "tool_use"]
    assert msg["content"][0]["signature"] and msg["stop_reason"] == "tool_use"
    assert msg["content"][2]["input"] == {"city": "S\u00e3o Paulo", "days": 2}
    events = [line[7:] for line in client.post("/v1/messages", json={**body, "stream": True}).text.splitlines()
              if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop") == 3


def test_qwen35_template_opens_thinking_in_the_prompt(setup):
    llm, client = setup
    llm.opens_think, llm.script = True, _split("Short thought.\n</think>\n\nHello!")
    msg = _chat(client).json()["choices"][0]["message"]
    assert (msg["reasoning_content"], msg["content"]) == ("Short thought.", "Hello!")


def test_thinking_can_be_turned_off_from_either_api(setup):
    llm, client = setup
    llm.opens_think, llm.script = True, ["Hello!"]
    msg = _chat(client, chat_template_kwargs={"enable_thinking": False}).json()["choices"][0]["message"]
    assert not llm.prompts[-1].endswith("<think>\n") and msg["content"] == "Hello!" and "reasoning" not in msg
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    client.post("/v1/messages", json={**body, "thinking": {"type": "disabled"}})
    assert not llm.prompts[-1].endswith("<think>\n")
    llm.script = ["Hmm.</think>Hello!"]
    msg = client.post("/v1/messages", json={**body, "thinking": {"type": "enabled", "budget_tokens": 1024}}).json()
    assert llm.prompts[-1].endswith("<think>\n")
    assert [(b["type"], b.get("thinking", b.get("text"))) for b in msg["content"]] == [
        ("thinking", "Hmm."), ("text", "Hello!")]


@pytest.mark.parametrize("xml", [False, True])
def test_named_tool_choice_prefills_the_call_in_the_templates_form(setup, xml):
    llm, client = setup
    llm.xml = xml
    # the XML form names the function in the prefill; the JSON form writes the whole call under the tool's schema
    # (the name a const in it, the arguments its parameters; then </tool_call>: SamplingParams.json_then)
    llm.script = ["<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"] if xml else \
        ['{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>']

    def named_in_the_constraint(*names):
        call = llm.params.json_schema
        calls = call.get("anyOf", [call])
        return (llm.params.json_then == "</tool_call>" and llm.prompts[-1].endswith("<tool_call>\n")
                and [c["properties"]["name"]["const"] for c in calls] == list(names))

    r = _chat(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}).json()
    assert llm.prompts[-1].endswith("<function=get_weather>\n") if xml else named_in_the_constraint("get_weather")
    call = r["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Oslo"}
    # "required" with one tool: that tool is named, so the call cannot name another
    _chat(client, tools=TOOLS, tool_choice="required")
    assert llm.prompts[-1].endswith("<function=get_weather>\n") if xml else named_in_the_constraint("get_weather")
    two = TOOLS + [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    llm.script = ['\n{"name": "get_time", "arguments": {}}\n</tool_call>']
    r = _chat(client, tools=two, tool_choice="required").json()
    assert llm.prompts[-1].endswith("<tool_call>\n")
    assert xml or named_in_the_constraint("get_weather", "get_time")
    assert r["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time"


def test_tool_choice_none_hides_tools_and_parses_nothing(setup):
    llm, client = setup
    llm.script = ['<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>']
    msg = _chat(client, tools=TOOLS, tool_choice="none").json()["choices"][0]
    assert "<tools>" not in llm.prompts[-1] and "tool_calls" not in msg["message"]
    assert msg["finish_reason"] == "stop"


def test_mid_stream_failure_ends_the_stream_with_an_error_and_the_worker_lives_on(setup):
    llm, client = setup
    llm.script = ["Hel", "lo", RuntimeError("device lost")]
    r = _chat(client, stream=True)
    assert r.status_code == 200 and "[DONE]" not in r.text
    data = _sse_data(r)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in data[:-1]) == "Hello"
    assert data[-1]["error"]["type"] == "server_error"
    body = {"model": "m", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    text = client.post("/v1/messages", json=body).text
    assert text.rstrip().splitlines()[-2:] == ["event: error", 'data: {"type": "error", "error": {"type": '
                                               '"api_error", "message": "The engine failed on this request '
                                               '(RuntimeError); see the server log."}}']
    r = _chat(client)  # not streaming: an internal failure is a 500 in the API's shape
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    llm.script = ["fine"]
    assert _chat(client).json()["choices"][0]["message"]["content"] == "fine"
    llm.script = [NinferError("Token id 9 is outside the vocabulary.")]  # the engine's bad-input error
    r = _chat(client)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("Token id 9")
    m = client.get("/metrics").json()
    assert m["failed"] == 3 and m["running"] is None


def test_a_failed_request_is_in_the_books_before_its_client_hears_of_it(setup, monkeypatch):
    """The worker settles a failed request's record (running, failed, recent) before it hands the client the error,
    so a client that reads /metrics on the error finds the request done. A slow clock in the worker widens the
    window where the record was still open (CI once caught /metrics between the two)."""
    import time as real_time

    import ninfer_server.worker as worker_mod

    class SlowClock:
        def time(self):
            real_time.sleep(0.2)
            return real_time.time()

    llm, client = setup
    monkeypatch.setattr(worker_mod, "time", SlowClock())
    for error, status, reason in ((RuntimeError("device lost"), 500, "error"),
                                  (NinferError("Token id 9 is outside the vocabulary."), 400, "rejected")):
        llm.script = [error]
        assert _chat(client).status_code == status
        m = client.get("/metrics").json()
        assert m["running"] is None and m["recent"] and m["recent"][-1]["finish_reason"] == reason
    assert m["failed"] == 1


def test_earlier_tool_calls_and_results_reach_a_template_that_ignores_them():
    """SmolLM2's own template writes neither an assistant turn's tool calls nor tool results as such: the server
    rewrites them as Qwen2.5's Hermes template does (calls in the assistant turn, a round's results in one user
    turn), both APIs' messages alike, so an agent's model sees what it called and what came back."""
    import msgspec
    from test_server_harness import engine_tokenizer_and_template

    from ninfer_server.anthropic_api import CountRequest, _messages
    from ninfer_server.generation import chat_plan, sampling_params

    tok, template = engine_tokenizer_and_template()

    class Real:  # the real checkpoint's tokenizer and template
        tokenizer, max_context = tok, 2048

        def render_chat(self, messages, tools=None, **kw):
            return template.render(messages, tools=tools, **kw)

    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    msgs = [{"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [call, {**call, "id": "call_2", "function": {
                "name": "get_weather", "arguments": {"city": "Rome"}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "24C"}]
    plan = chat_plan(Real(), msgs, sampling_params(), TOOLS)
    hermes = [msgs[0], {"role": "assistant", "content":
                        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                        '</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n'
                        '</tool_call>'},
              {"role": "user", "content": "<tool_response>\n18C\n</tool_response>\n<tool_response>\n24C\n"
                                          "</tool_response>"}]
    expected = template.render(_with_tools_system(hermes), add_generation_prompt=True)
    assert tok.decode(plan.prompt_ids) == expected
    # the same conversation through the Anthropic API's blocks gives the same prompt
    req = msgspec.convert(dict(model="m", messages=[
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}},
                                          {"type": "tool_use", "id": "toolu_2", "name": "get_weather",
                                           "input": {"city": "Rome"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                                     {"type": "tool_result", "tool_use_id": "toolu_2",
                                      "content": [{"type": "text", "text": "24C"}]}]}]), CountRequest)
    assert chat_plan(Real(), _messages(req), sampling_params(), TOOLS).prompt_ids == plan.prompt_ids


def _with_tools_system(messages):
    from ninfer_server.generation import _with_tool_prompt

    return _with_tool_prompt(messages, TOOLS)


def test_a_model_name_with_slashes_can_be_retrieved():
    llm = ScriptedLLM()
    state = ServerState(llm, EngineWorker(llm, 4), ["Qwen/Qwen3.5-27B", "m"], None, 10.0)
    with TestClient(create_app(state)) as client:
        assert client.get("/v1/models/Qwen/Qwen3.5-27B").json()["id"] == "Qwen/Qwen3.5-27B"
        r = client.get("/v1/models/Qwen/other")
        assert r.status_code == 404 and r.json()["error"]["param"] == "model"
