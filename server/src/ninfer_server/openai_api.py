"""OpenAI-compatible routes: /v1/models, /v1/chat/completions, /v1/completions."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import PurePosixPath
from typing import Union

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath

from .common import (
    check_model,
    collect,
    decode_body,
    first_error,
    gone_response,
    server_of,
    sse_response,
)
from .errors import APIError
from .generation import Event, chat_plan, completion_plan, sampling_params

Content = Union[str, list[dict], None]


class ChatMessage(msgspec.Struct):
    role: str
    content: Content = None
    name: str | None = None
    tool_calls: list[dict] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None


class FunctionDef(msgspec.Struct):
    name: str
    description: str | None = None
    parameters: dict | None = None


class ToolDef(msgspec.Struct):
    function: FunctionDef
    type: str = "function"


class Sampling(msgspec.Struct):
    model: str
    stream: bool = False
    stream_options: dict | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: Union[str, list[str], None] = None
    n: int | None = None
    ignore_eos: bool | None = None


class ChatRequest(Sampling):
    messages: list[ChatMessage] = []
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[ToolDef] | None = None
    tool_choice: Union[str, dict, None] = None
    chat_template_kwargs: dict | None = None
    continue_final_message: bool = False  # vLLM's: go on from the final assistant message's last character
    response_format: dict | None = None


class CompletionRequest(Sampling):
    prompt: Union[str, list] = ""  # a string, [one string] or token ids
    logprobs: int | None = None
    echo: bool = False


def _params(req, max_tokens, logprobs, response_format=(None, None)):
    if req.n not in (None, 1):
        raise APIError(400, f"n must be 1 (this server generates one choice per request), got {req.n}.", "n")
    if req.temperature is not None and not 0 <= req.temperature <= 2:
        raise APIError(400, f"temperature must be between 0 and 2, got {req.temperature}.", "temperature")
    if req.stream_options is not None and not req.stream:
        raise APIError(400, "stream_options is only allowed with stream: true.", "stream_options")
    if max_tokens is not None and max_tokens < 1:
        raise APIError(400, f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens")
    stop = [req.stop] if isinstance(req.stop, str) else req.stop
    params = sampling_params(
        temperature=req.temperature, top_p=req.top_p, top_k=req.top_k, min_p=req.min_p,
        presence_penalty=req.presence_penalty, frequency_penalty=req.frequency_penalty,
        repetition_penalty=req.repetition_penalty, seed=req.seed, stop=stop, ignore_eos=req.ignore_eos,
        logprobs=logprobs, response_format=response_format[0], json_schema=response_format[1])
    params.max_tokens = max_tokens  # None: up to the end of the context, as OpenAI's chat does
    return params


def _text(content: Content, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise APIError(400, f"{where}: only text content parts are supported, got {part.get('type')!r}.", where)
        parts.append(part["text"])
    return "".join(parts)


def _messages(req: ChatRequest) -> list[dict]:
    if not req.messages:
        raise APIError(400, "messages must hold at least one message.", "messages")
    out = []
    for i, m in enumerate(req.messages):
        role = "system" if m.role == "developer" else m.role
        if role not in ("system", "user", "assistant", "tool"):
            raise APIError(400, f"messages[{i}].role must be system, user, assistant or tool, got {m.role!r}.",
                           f"messages.{i}.role")
        msg = {"role": role, "content": _text(m.content, f"messages.{i}.content")}
        if m.tool_calls:
            msg["tool_calls"] = [_call_for_template(c, f"messages.{i}.tool_calls.{j}")
                                 for j, c in enumerate(m.tool_calls)]
        if m.tool_call_id:
            msg["tool_call_id"] = m.tool_call_id
        if m.name:
            msg["name"] = m.name
        if m.reasoning_content:
            msg["reasoning_content"] = m.reasoning_content
        out.append(msg)
    return out


def _call_for_template(call, where: str) -> dict:
    """Templates (Qwen) iterate arguments as a mapping; the API carries them as JSON text."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict) \
            or not isinstance(call["function"].get("name"), str):
        raise APIError(400, f'{where} must be {{"id": ..., "type": "function", "function": {{"name": ..., '
                            '"arguments": "<JSON text>"}}.', where)
    fn = dict(call["function"])
    if isinstance(fn.get("arguments"), str):
        try:
            fn["arguments"] = json.loads(fn["arguments"])
        except ValueError:
            pass
    return {**call, "function": fn}


def _tool_choice(choice, tools):
    if choice is None:
        return "auto" if tools else "none"
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
        if not isinstance(name, str):
            raise APIError(400, 'tool_choice must be "auto", "none", "required" or '
                                '{"type": "function", "function": {"name": ...}}.', "tool_choice")
        choice = name
    elif choice not in ("auto", "none", "required"):
        raise APIError(400, f'tool_choice must be "auto", "none", "required" or a named function, got {choice!r}.',
                       "tool_choice")
    if not tools and choice not in ("auto", "none"):
        raise APIError(400, f"tool_choice {choice!r} needs tools; give the tools in the request's tools field.",
                       "tool_choice")
    return choice


def _response_format(fmt: dict | None) -> tuple[str | None, dict | bool | None]:
    """(SamplingParams.response_format, json_schema): json_object constrains the output to one JSON object
    (ninfer.engine.json_mode), json_schema to one document valid against the schema (ninfer.engine.json_schema)."""
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is None or kind == "text":
        return None, None
    if kind == "json_object":
        return kind, None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", True), (dict, bool)):
            raise APIError(400, "response_format json_schema needs a json_schema object with the schema in its "
                                "schema field: {\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., "
                                "\"schema\": {...}}}.", "response_format")
        return kind, spec.get("schema", True)  # (checked with the other fields, by SamplingParams)
    raise APIError(400, f"response_format.type must be text, json_object or json_schema, got {kind!r}.",
                   "response_format")


def _token(llm, tid: int) -> tuple[str, list[int]]:
    """A token's text and bytes: the bytes whole, the text with U+FFFD where a character spans tokens."""
    raw = llm.tokenizer.token_bytes(tid)
    return raw.decode("utf-8", errors="replace"), list(raw)


def _logprobs_content(llm, lps: list) -> list[dict]:
    def entry(tid, lp):
        tok, raw = _token(llm, tid)
        return {"token": tok, "logprob": lp, "bytes": raw}

    return [{**entry(x["token_id"], x["logprob"]), "top_logprobs": [entry(t, v) for t, v in x["top"]]} for x in lps]


def _usage(ev: Event) -> dict:
    u = ev.usage
    return {**u, "total_tokens": u["prompt_tokens"] + u["completion_tokens"]}


_STARTED = int(time.time())


def _model_entry(server, name: str) -> dict:
    """One model in both APIs' shapes (OpenAI: id, object, created, owned_by; Anthropic: id, type,
    display_name, created_at), so either SDK's models.list() / retrieve() reads it."""
    return {"id": name, "object": "model", "created": _STARTED, "owned_by": "ninfer", "type": "model",
            "display_name": name, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_STARTED)),
            "max_model_len": server.llm.max_context}


@get("/v1/models")
async def list_models(request: Request) -> Response:
    server = server_of(request)
    data = [_model_entry(server, n) for n in server.model_names]
    return Response({"object": "list", "data": data, "has_more": False,
                     "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})


@get("/v1/models/{model_id:path}")
async def get_model(request: Request, model_id: FromPath[PurePosixPath]) -> Response:
    server = server_of(request)
    name = str(model_id).lstrip("/")  # names may hold slashes (Qwen/Qwen3.5-27B)
    check_model(server, name)
    return Response(_model_entry(server, name))


@post("/v1/chat/completions", status_code=200)
async def chat_completions(request: Request) -> Response:
    server = server_of(request)
    req = await decode_body(request, ChatRequest)
    model = check_model(server, req.model)
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs: true.", "top_logprobs")
    logprobs = (req.top_logprobs or 0) if req.logprobs else None
    params = _params(req, max_tokens, logprobs, _response_format(req.response_format))
    tools = [msgspec.to_builtins(t) for t in req.tools] if req.tools else None
    kwargs = dict(req.chat_template_kwargs or {})
    thinking = kwargs.pop("enable_thinking", None)
    if params.response_format and tools:
        raise APIError(400, f"response_format {params.response_format} and tools cannot go together: a tool call "
                            "is not the JSON document asked for; leave one out.", "response_format")
    plan = chat_plan(server.llm, _messages(req), params, tools, _tool_choice(req.tool_choice, tools), thinking,
                     kwargs, continue_final=req.continue_final_message)
    rid, created = "chatcmpl-" + uuid.uuid4().hex[:24], int(time.time())
    head = {"id": rid, "object": "chat.completion", "created": created, "model": model}
    if not req.stream:
        events = await collect(request, server, plan)
        if events is None:
            return gone_response()
        first_error(events)
        return Response(_chat_body(server.llm, head, events))
    usage_asked = bool((req.stream_options or {}).get("include_usage"))
    return sse_response(request, server, plan, lambda evs: _chat_frames(server.llm, head, evs, usage_asked))


def _chat_body(llm, head: dict, events: list[Event]) -> dict:
    content, reasoning, calls, lps, fin = "", "", {}, [], events[-1]
    for ev in events:
        if ev.kind == "content":
            content += ev.text
        elif ev.kind == "reasoning":
            reasoning += ev.text
        elif ev.kind == "logprobs":
            lps += ev.logprobs
        elif ev.kind == "tool":
            d = ev.tool
            if d.name is not None:
                calls[d.index] = {"id": d.id, "type": "function", "function": {"name": d.name, "arguments": ""}}
            calls[d.index]["function"]["arguments"] += d.arguments
    msg = {"role": "assistant", "content": content if content or not calls else None}
    if reasoning:
        msg["reasoning_content"] = msg["reasoning"] = reasoning
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice = {"index": 0, "message": msg, "finish_reason": fin.finish_reason,
              "logprobs": {"content": _logprobs_content(llm, lps)} if lps else None}
    return {**head, "choices": [choice], "usage": _usage(fin)}


async def _chat_frames(llm, head: dict, events, usage_asked: bool):
    head = {**head, "object": "chat.completion.chunk"}

    def frame(delta=None, finish=None, logprobs=None, usage=None) -> bytes:
        body = {**head, "choices": [] if delta is None else
                [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
        if usage_asked:
            body["usage"] = usage
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    pending: list = []  # logprobs of tokens whose text has not gone out yet: they ride with it

    def lp():
        out = {"content": _logprobs_content(llm, pending)} if pending else None
        pending.clear()
        return out

    yield frame({"role": "assistant", "content": ""})  # the role, once, first
    async for ev in events:
        if ev.kind == "keepalive":
            yield b": keep-alive\n\n"
        elif ev.kind == "error":
            raise ev.error
        elif ev.kind == "content":
            yield frame({"content": ev.text}, logprobs=lp())
        elif ev.kind == "reasoning":
            yield frame({"reasoning_content": ev.text, "reasoning": ev.text}, logprobs=lp())
        elif ev.kind == "logprobs":
            pending += ev.logprobs
        elif ev.kind == "tool":
            d = ev.tool
            call = {"index": d.index, "function": {"arguments": d.arguments}}
            if d.name is not None:
                call = {"index": d.index, "id": d.id, "type": "function",
                        "function": {"name": d.name, "arguments": d.arguments}}
            yield frame({"tool_calls": [call]}, logprobs=lp())
        elif ev.kind == "finish":
            yield frame({}, ev.finish_reason, logprobs=lp())
            if usage_asked:
                yield frame(usage=_usage(ev))
    yield b"data: [DONE]\n\n"


@post("/v1/completions", status_code=200)
async def completions(request: Request) -> Response:
    server = server_of(request)
    req = await decode_body(request, CompletionRequest)
    model = check_model(server, req.model)
    prompt = req.prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    elif isinstance(prompt, list) and not all(type(t) is int for t in prompt):
        raise APIError(400, "prompt must be a string or a list of token ids (batches are not supported).", "prompt")
    max_tokens = 16 if req.max_tokens is None else req.max_tokens  # OpenAI's default for completions
    params = _params(req, max_tokens, req.logprobs)
    plan = completion_plan(server.llm, prompt, params)
    echo = (prompt if isinstance(prompt, str) else server.llm.tokenizer.decode(prompt)) if req.echo else ""
    head = {"id": "cmpl-" + uuid.uuid4().hex[:24], "object": "text_completion", "created": int(time.time()),
            "model": model}
    if not req.stream:
        events = await collect(request, server, plan)
        if events is None:
            return gone_response()
        first_error(events)
        text = echo + "".join(ev.text for ev in events if ev.kind == "content")
        lps = [x for ev in events if ev.kind == "logprobs" for x in ev.logprobs]
        choice = {"index": 0, "text": text, "finish_reason": events[-1].finish_reason,
                  "logprobs": _completion_logprobs(server.llm, lps, len(echo)) if lps else None}
        return Response({**head, "choices": [choice], "usage": _usage(events[-1])})
    usage_asked = bool((req.stream_options or {}).get("include_usage"))
    return sse_response(request, server, plan,
                        lambda evs: _completion_frames(server.llm, head, evs, usage_asked, echo))


def _completion_logprobs(llm, lps: list, offset: int) -> dict:
    """The legacy shape; text_offset: where each token starts in the choice's text (bytes of a character
    split over tokens count at the token that completes it)."""
    toks = [_token(llm, x["token_id"])[0] for x in lps]
    offsets, at = [], offset
    for t in toks:
        offsets.append(at)
        at += len(t.replace("\ufffd", ""))
    return {"tokens": toks, "token_logprobs": [x["logprob"] for x in lps], "text_offset": offsets,
            "top_logprobs": [{_token(llm, t)[0]: v for t, v in x["top"]} for x in lps]}


async def _completion_frames(llm, head: dict, events, usage_asked: bool, echo: str = ""):
    def frame(text=None, finish=None, logprobs=None, usage=None) -> bytes:
        body = {**head, "choices": [] if text is None else
                [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}]}
        if usage_asked:
            body["usage"] = usage
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    pending: list = []  # logprobs of tokens whose text has not gone out yet: they ride with it
    at = len(echo)  # characters sent so far, for text_offset

    def lp():
        out = _completion_logprobs(llm, pending, at) if pending else None
        pending.clear()
        return out

    if echo:
        yield frame(echo)
    async for ev in events:
        if ev.kind == "keepalive":
            yield b": keep-alive\n\n"
        elif ev.kind == "error":
            raise ev.error
        elif ev.kind == "content":
            yield frame(ev.text, logprobs=lp())
            at += len(ev.text)
        elif ev.kind == "logprobs":
            pending += ev.logprobs
        elif ev.kind == "finish":
            yield frame("", ev.finish_reason, logprobs=lp())
            if usage_asked:
                yield frame(usage=_usage(ev))
    yield b"data: [DONE]\n\n"
