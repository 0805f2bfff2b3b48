"""Anthropic-compatible routes: /v1/messages (also ?beta=true) and /v1/messages/count_tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import uuid
from typing import Union

import msgspec
from litestar import Request, Response, post

from .common import (
    ServerState,
    check_model,
    collect,
    decode_body,
    first_error,
    gone_response,
    server_of,
    sse_response,
)
from .errors import APIError
from .generation import Event, chat_plan, sampling_params

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_SIGNING_KEY = os.urandom(32)  # thinking signatures only need to be stable within this server's life


class AMessage(msgspec.Struct):
    role: str
    content: Union[str, list[dict]]


class ATool(msgspec.Struct):
    name: str
    description: str | None = None
    input_schema: dict | None = None


class CountRequest(msgspec.Struct):
    model: str
    messages: list[AMessage]
    system: Union[str, list[dict], None] = None
    tools: list[ATool] | None = None
    tool_choice: dict | None = None
    thinking: dict | None = None


class MessagesRequest(CountRequest):
    max_tokens: int | None = None  # required: checked by hand so the error names it
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None
    metadata: dict | None = None


def signature(thinking: str) -> str:
    return base64.b64encode(hmac.new(_SIGNING_KEY, thinking.encode(), hashlib.sha256).digest()).decode()


def _field(block: dict, key: str, where: str, kind=str):
    """A block's field of the type the API gives it, or a 400 that names it."""
    value = block.get(key)
    if not isinstance(value, kind):
        raise APIError(400, f"{where}.{key} must be a {'string' if kind is str else 'object'}, "
                            f"got {type(value).__name__}.", f"{where}.{key}")
    return value


def _blocks(content, where: str) -> list[dict]:
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise APIError(400, f"{where} must be a string or a list of content blocks (objects with a type).", where)
    return content


def _block_text(content, where: str) -> str:
    if isinstance(content, str) or content is None:
        return content or ""
    parts = []
    for i, b in enumerate(_blocks(content, where)):
        if b.get("type") != "text":
            raise APIError(400, f"{where}: only text blocks are supported here, got {b.get('type')!r}.", where)
        parts.append(_field(b, "text", f"{where}.{i}"))
    return "".join(parts)


def _result_text(content, where: str) -> str:
    """A tool result's text; an image or document in it is named, not fatal, so agent loops go on."""
    if isinstance(content, str) or content is None:
        return content or ""
    return "".join(_field(b, "text", f"{where}.{i}") if b.get("type") == "text" else f"[{b.get('type')} omitted]"
                   for i, b in enumerate(_blocks(content, where)))


def _messages(req: CountRequest) -> list[dict]:
    out = [{"role": "system", "content": _block_text(req.system, "system")}] if req.system else []
    if not req.messages:
        raise APIError(400, "messages: at least one message is required.", "messages")
    for i, m in enumerate(req.messages):
        where = f"messages.{i}"
        if m.role not in ("user", "assistant"):
            raise APIError(400, f"{where}.role must be user or assistant, got {m.role!r}.", f"{where}.role")
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
            continue
        text, thinking, calls = "", "", []
        for j, b in enumerate(_blocks(m.content, f"{where}.content")):
            kind, at = b.get("type"), f"{where}.content.{j}"
            if kind == "text":
                text += _field(b, "text", at)
            elif kind == "thinking" and m.role == "assistant":
                thinking += _field(b, "thinking", at)
            elif kind == "redacted_thinking":
                continue
            elif kind == "tool_use" and m.role == "assistant":
                calls.append({"id": b.get("id"), "type": "function",
                              "function": {"name": _field(b, "name", at),
                                           "arguments": _field(b, "input", at, dict) if "input" in b else {}}})
            elif kind == "tool_result" and m.role == "user":
                result = _result_text(b.get("content"), f"{at}.content")
                if b.get("is_error"):
                    result = "Error: " + result
                out.append({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": result})
            else:
                raise APIError(400, f"{where}: content blocks of type {kind!r} are not supported in "
                                    f"{m.role} messages.", f"{where}.content")
        if text or calls or thinking or m.role == "assistant":
            msg = {"role": m.role, "content": text}
            if calls:
                msg["tool_calls"] = calls
            if thinking:
                msg["reasoning_content"] = thinking
            out.append(msg)
    return out


def _tools_and_choice(req: CountRequest):
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                               "parameters": t.input_schema or {"type": "object"}}}
             for t in req.tools or []] or None
    choice = (req.tool_choice or {}).get("type", "auto")
    if choice == "any":
        choice = "required"
    elif choice == "tool":
        choice = (req.tool_choice or {}).get("name")
        if not isinstance(choice, str):
            raise APIError(400, 'tool_choice of type "tool" needs the name of one of the tools.', "tool_choice.name")
    elif choice not in ("auto", "none"):
        raise APIError(400, f"tool_choice.type must be auto, any, tool or none, got {choice!r}.", "tool_choice")
    if not tools and choice not in ("auto", "none"):
        raise APIError(400, "tool_choice forces a tool call, but the request gives no tools.", "tool_choice")
    thinking = (req.thinking or {}).get("type")
    return tools, choice, None if thinking is None else thinking != "disabled"


def _plan(server: ServerState, req: CountRequest, params, check=True):
    """The prompt; a final assistant message is a prefill the answer goes on from, as Anthropic's API does."""
    tools, choice, thinking = _tools_and_choice(req)
    return chat_plan(server.llm, _messages(req), params, tools, choice, thinking, check=check, continue_final=True)


@post(["/v1/messages/count_tokens"], status_code=200)
async def count_tokens(request: Request) -> Response:
    server = server_of(request)
    req = await decode_body(request, CountRequest)
    check_model(server, req.model)
    plan = _plan(server, req, sampling_params(), check=False)
    return Response({"input_tokens": len(plan.prompt_ids)})


@post(["/v1/messages"], status_code=200)
async def messages(request: Request) -> Response:
    server = server_of(request)
    req = await decode_body(request, MessagesRequest)
    if req.max_tokens is None:
        raise APIError(400, "max_tokens: Field required; give the most tokens to generate.", "max_tokens")
    if req.max_tokens < 1:
        raise APIError(400, f"max_tokens must be at least 1, got {req.max_tokens}.", "max_tokens")
    if req.temperature is not None and not 0 <= req.temperature <= 1:
        raise APIError(400, f"temperature must be between 0 and 1, got {req.temperature}.", "temperature")
    model = check_model(server, req.model)
    params = sampling_params(temperature=req.temperature, top_p=req.top_p, top_k=req.top_k,
                             stop=req.stop_sequences, max_tokens=req.max_tokens)
    plan = _plan(server, req, params)
    head = {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": model}
    if not req.stream:
        events = await collect(request, server, plan)
        if events is None:
            return gone_response()
        first_error(events)
        return Response(_message_body(head, events))
    return sse_response(request, server, plan, lambda evs: _message_frames(head, evs, len(plan.prompt_ids)))


def _message_body(head: dict, events: list[Event]) -> dict:
    blocks: list[dict] = []
    args: dict[int, str] = {}
    for ev in events:
        kind = {"reasoning": "thinking", "content": "text"}.get(ev.kind)
        if kind:
            if not blocks or blocks[-1]["type"] != kind:
                blocks.append({"type": kind, kind: ""})
            blocks[-1][kind] += ev.text
        elif ev.kind == "tool":
            d = ev.tool
            if d.name is not None:
                blocks.append({"type": "tool_use", "id": _tool_id(d.id), "name": d.name, "input": {}, "_i": d.index})
            args[d.index] = args.get(d.index, "") + d.arguments
    for b in blocks:
        if b["type"] == "thinking":
            b["signature"] = signature(b["thinking"])
        if b["type"] == "tool_use":
            b["input"] = _input(args.get(b.pop("_i"), ""))
    fin = events[-1]
    return {**head, "content": blocks, "stop_reason": _stop_reason(fin), "stop_sequence": fin.stop_sequence,
            "usage": {"input_tokens": fin.usage["prompt_tokens"], "output_tokens": fin.usage["completion_tokens"]}}


def _tool_id(call_id: str) -> str:
    """Anthropic spells tool-use ids toolu_...; the parser's are OpenAI's call_..."""
    return "toolu_" + call_id.removeprefix("call_")


def _input(arguments: str) -> dict:
    try:
        val = json.loads(arguments or "{}")
    except ValueError:
        return {"_raw": arguments}  # the model wrote broken JSON: hand it over rather than lose it
    return val if isinstance(val, dict) else {"value": val}


def _stop_reason(fin: Event) -> str:
    return "stop_sequence" if fin.stop_sequence else STOP_REASONS.get(fin.finish_reason, "end_turn")


def _sse(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _message_frames(head: dict, events, n_prompt: int):
    start = {**head, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": n_prompt, "output_tokens": 0}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    index, open_kind, thought = -1, None, ""

    def close():
        out = []
        if open_kind == "thinking":
            out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "signature_delta", "signature": signature(thought)}}))
        if open_kind:
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        return out

    async for ev in events:
        if ev.kind == "keepalive":
            yield _sse("ping", {"type": "ping"})
        elif ev.kind == "error":
            raise ev.error
        elif ev.kind in ("reasoning", "content"):
            kind = "thinking" if ev.kind == "reasoning" else "text"
            if open_kind != kind:
                for f in close():
                    yield f
                index, open_kind, thought = index + 1, kind, ""
                yield _sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": kind, kind: ""}})
            thought += ev.text if kind == "thinking" else ""
            delta = {"type": "thinking_delta", "thinking": ev.text} if kind == "thinking" else \
                {"type": "text_delta", "text": ev.text}
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        elif ev.kind == "tool":
            d = ev.tool
            if d.name is not None:
                for f in close():
                    yield f
                index, open_kind = index + 1, "tool_use"
                yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block":
                                                   {"type": "tool_use", "id": _tool_id(d.id), "name": d.name,
                                                    "input": {}}})
            if d.arguments:
                yield _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "input_json_delta", "partial_json": d.arguments}})
        elif ev.kind == "finish":
            for f in close():
                yield f
            open_kind = None
            yield _sse("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": _stop_reason(ev), "stop_sequence": ev.stop_sequence},
                                         "usage": {"input_tokens": n_prompt,
                                                   "output_tokens": ev.usage["completion_tokens"]}})
            yield _sse("message_stop", {"type": "message_stop"})
