"""From a parsed API request to engine work and back: prompt, sampling, and output events.

Both APIs share this: they turn their request into a :class:`Plan`, then turn the :class:`Event` s
of :func:`run` into their own wire format.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from typing import AsyncIterator

from ninfer.chat.reasoning import ReasoningParser, prompt_opens_reasoning
from ninfer.chat.tool_parsers import CALL_CLOSE, ToolCallDelta, ToolCallParser
from ninfer.config.sampling import SamplingParams
from ninfer.errors import ContextLengthError, NinferError

from .errors import APIError
from .worker import Job, QueueFullError

# For templates that do not render tools (e.g. SmolLM2): the Hermes instructions Qwen2.5 uses.
HERMES_TOOL_PROMPT = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


@dataclass
class Plan:
    prompt_ids: list[int]
    params: SamplingParams
    tools: list | None = None  # OpenAI-shaped; their schemas type Qwen3-Coder parameter values
    parse_tools: bool = False
    parse_reasoning: bool = False
    start_in_reasoning: bool = False
    prefill: str = ""  # text the server wrote into the assistant turn (tool_choice); part of the output


@dataclass
class Event:
    kind: str  # reasoning | content | tool | logprobs | keepalive | finish | error
    text: str = ""
    tool: ToolCallDelta | None = None
    logprobs: list | None = None
    finish_reason: str | None = None  # stop | length | tool_calls | cancelled
    stop_sequence: str | None = None
    usage: dict = field(default_factory=dict)
    error: APIError | None = None


def sampling_params(**fields) -> SamplingParams:
    if fields.get("top_k") == -1:  # vLLM's spelling of "off", which some clients send
        fields["top_k"] = 0
    try:
        return SamplingParams(**{k: v for k, v in fields.items() if v is not None})
    except NinferError as e:  # the field a message starts with is the request's param (the schema: response_format)
        first = str(e).split(" ", 1)[0]
        param = "response_format" if first == "json_schema" else first if first in fields else None
        raise APIError(400, str(e), param) from None


def check_fits(llm, n_prompt: int, max_tokens: int | None, where: str = "messages") -> None:
    """A prompt that leaves no room, or max_tokens the context can never hold, is the client's error."""
    if n_prompt >= llm.max_context:
        raise APIError(400, f"The prompt has {n_prompt} tokens but this model's context holds "
                            f"{llm.max_context}; shorten the prompt.", where, "context_length_exceeded")
    if max_tokens is not None and max_tokens > llm.max_context:
        raise APIError(400, f"max_tokens is {max_tokens} but this model's context holds {llm.max_context} "
                            "tokens; ask for fewer.", "max_tokens", "context_length_exceeded")


def _with_tool_prompt(messages: list[dict], tools: list) -> list[dict]:
    text = HERMES_TOOL_PROMPT.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + text}] + messages[1:]
    return [{"role": "system", "content": text}] + messages


def _hermes_history(messages: list[dict]) -> list[dict]:
    """Earlier tool calls and their results as Qwen2.5's Hermes template writes them, for templates that
    render neither: each call a ``<tool_call>`` in its assistant turn, the results of one round in one user
    turn of ``<tool_response>`` s. Without this the model never sees what it called or what came back."""
    out: list[dict] = []
    results = False  # the last turn in out is a user turn of tool results
    for m in messages:
        if m["role"] == "tool":
            text = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if results:
                out[-1] = {**out[-1], "content": out[-1]["content"] + "\n" + text}
            else:
                out.append({"role": "user", "content": text})
            results = True
            continue
        results = False
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = c.get("function") or {}
                calls.append("<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")},
                                                          ensure_ascii=False) + "\n</tool_call>")
            text = m.get("content") or ""
            m = {k: v for k, v in m.items() if k != "tool_calls"}
            m["content"] = (text + "\n" if text else "") + "\n".join(calls)
        out.append(m)
    return out


_PROBE = "ninfer_probe_call"


def _renders_tool_calls(llm) -> bool:
    """Whether the model's template writes an assistant turn's tool calls into the prompt (cached per model)."""
    cached = getattr(llm, "_ninfer_renders_tool_calls", None)
    if cached is None:
        probe = [{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "", "tool_calls": [
                     {"id": "call_0", "type": "function", "function": {"name": _PROBE, "arguments": {}}}]},
                 {"role": "tool", "tool_call_id": "call_0", "content": "ok"}]
        try:
            cached = _PROBE in llm.render_chat(probe, add_generation_prompt=True)
        except Exception:  # a template that insists on its own message shapes: leave the messages as they are
            cached = True
        try:
            llm._ninfer_renders_tool_calls = cached
        except AttributeError:
            pass
    return cached


# template variables the request sets through its own fields
_RESERVED_TEMPLATE_KWARGS = ("messages", "tools", "add_generation_prompt", "bos_token", "eos_token")


def _continued(llm, messages: list[dict], kw: dict, enable_thinking) -> str:
    """The prompt that ends inside the final assistant message, so the model goes on from its last
    character (Anthropic's prefill; OpenAI clients ask with ``continue_final_message``)."""
    text = messages[-1].get("content") or ""
    full = llm.render_chat(messages, add_generation_prompt=False, enable_thinking=enable_thinking, **kw)
    at = full.rfind(text)
    if at < 0:
        raise APIError(400, "The model's chat template rewrites the final assistant message, so it cannot be "
                            "continued; end the conversation with a user message instead.", "messages")
    return full[:at + len(text)]


def chat_plan(llm, messages: list[dict], params: SamplingParams, tools: list | None = None,
              tool_choice="auto", enable_thinking: bool | None = None, template_kwargs: dict | None = None,
              check: bool = True, continue_final: bool = False) -> Plan:
    """Render the conversation with the model's own template; steer ``tool_choice`` by prefill.

    ``none``: tools are not shown and not parsed. ``required``: the assistant turn is prefilled with
    ``<tool_call>`` (and the name, when there is one tool; with several, the output must begin by naming one of
    them), so the model must write a call to a tool it was given. A named
    tool: the prefill also names it, in the form (Hermes JSON or Qwen3-Coder XML) the template teaches.
    ``continue_final``: a final assistant message with text is continued, not answered.
    """
    kw = dict(template_kwargs or {})
    reserved = [k for k in _RESERVED_TEMPLATE_KWARGS if k in kw]
    if reserved:
        raise APIError(400, f"chat_template_kwargs may not set {reserved[0]!r}; the request's own fields set it.",
                       "chat_template_kwargs")
    tools = tools if tools and tool_choice != "none" else None
    continue_final = continue_final and messages[-1]["role"] == "assistant" and bool(messages[-1].get("content"))
    if not _renders_tool_calls(llm) and any(m.get("tool_calls") or m["role"] == "tool" for m in messages):
        messages = _hermes_history(messages)
    try:
        def render(msgs, **more):
            if continue_final:
                return _continued(llm, msgs, {**kw, **more}, enable_thinking)
            return llm.render_chat(msgs, enable_thinking=enable_thinking, **kw, **more)

        prompt = render(messages, tools=tools)
        if tools and prompt == render(messages):
            prompt = render(_with_tool_prompt(messages, tools))
    except NinferError as e:
        raise APIError(400, str(e), "messages") from None
    except TypeError as e:  # e.g. a chat_template_kwargs value the template cannot take
        raise APIError(400, f"The chat template could not be rendered with these arguments ({e}).",
                       "chat_template_kwargs") from None
    prefill = ""
    if tools and tool_choice not in (None, "auto") and not continue_final:
        xml = "<function=" in prompt
        name = tool_choice
        if tool_choice == "required":
            names = [t["function"]["name"] for t in tools]
            name = names[0] if len(names) == 1 else None
        elif name not in {t["function"]["name"] for t in tools}:
            raise APIError(400, f"tool_choice names {name!r}, which is not among the tools given.", "tool_choice")
        strict = None if xml or params.ignore_eos else _strict_call(tools, name)
        if strict is not None:  # the whole call constrained: a tool's name and arguments valid against its schema
            prefill = "<tool_call>\n"
            params = dataclasses.replace(params, response_format="json_schema", json_schema=strict,
                                         json_then=CALL_CLOSE, starts_with=())
        elif name is None:  # one of several: the call's first bytes name one of them (SamplingParams.starts_with)
            prefill = "<tool_call>\n"
            names = [t["function"]["name"] for t in tools]
            params = dataclasses.replace(params, starts_with=tuple(
                f"<function={n}>\n" if xml else f'{{"name": {json.dumps(n)}, "arguments": ' for n in names))
        else:
            prefill = f"<tool_call>\n<function={name}>\n" if xml else \
                f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": '
        if prompt_opens_reasoning(prompt):  # a forced call skips thinking
            prompt = prompt + "\n</think>\n\n"
    elif params.response_format and not continue_final and prompt_opens_reasoning(prompt):
        prompt = prompt + "\n</think>\n\n"  # JSON mode: the answer is the object, from its first token
    start_in_reasoning = not prefill and not continue_final and prompt_opens_reasoning(prompt)
    ids = llm.tokenizer.encode(prompt + prefill)
    if check:
        check_fits(llm, len(ids), params.max_tokens)
    return Plan(ids, params, tools, bool(tools), not prefill, start_in_reasoning, prefill)


def _strict_call(tools: list[dict], name: str | None) -> dict | None:
    """The JSON Schema of a forced tool call (``name``, or any of ``tools`` where None): {"name": ..., "arguments":
    ...} with the arguments valid against the tool's parameters. None where a tool's parameters use keywords the
    constraint cannot enforce (ninfer.engine.json_schema refuses them): that call's arguments then go unconstrained,
    as before, rather than the request failing."""
    from ninfer.engine.json_schema import check_schema

    chosen = [t for t in tools if name is None or t["function"]["name"] == name]
    for tighten in (True, False):
        calls, defs = [], {}
        for t in chosen:
            args = _call_arguments(t["function"].get("parameters"), tighten)
            if isinstance(args, dict):  # a tool's $defs move to the call's root, where its "#/$defs/..." now point
                for key in ("$defs", "definitions"):
                    for k, v in (args.get(key) or {}).items():
                        if defs.setdefault(key, {}).setdefault(k, v) != v:
                            return None  # two tools define one name differently
                args = {k: v for k, v in args.items() if k not in ("$defs", "definitions")}
            calls.append({"type": "object", "required": ["name", "arguments"], "additionalProperties": False,
                          "properties": {"name": {"const": t["function"]["name"]}, "arguments": args}})
        schema = {**(calls[0] if len(calls) == 1 else {"anyOf": calls}), **defs}
        if _refers_to_root(schema):
            return None  # a reference to a tool's own root would point at the call's
        try:
            check_schema(schema)
            return schema
        except NinferError:
            continue
    return None


def _call_arguments(params, tighten: bool):
    """A tool's parameters as the call is written: no parameters take the empty object; with ``tighten``, objects
    that list their properties take no others (as OpenAI's strict function calling has it). Every call so written
    is valid against the tool's own schema; a small model otherwise invents keys until max_tokens."""
    if params is None:
        return {"type": "object", "additionalProperties": False}
    if not tighten:
        return params

    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: v if k in _DATA else {n: walk(x) for n, x in v.items()} if k in _NAMED and isinstance(v, dict)
               else walk(v) for k, v in node.items()}
        if isinstance(node.get("properties"), dict):
            out.setdefault("additionalProperties", False)
        return out

    return walk(params)


_DATA = ("enum", "const", "default", "examples", "required")  # JSON Schema keywords whose values are data
_NAMED = ("properties", "$defs", "definitions")  # keywords whose values map names to schemas


def _refers_to_root(node) -> bool:
    if isinstance(node, list):
        return any(_refers_to_root(v) for v in node)
    if not isinstance(node, dict):
        return False
    return node.get("$ref") == "#" or any(_refers_to_root(v) for k, v in node.items() if k not in _DATA)


def completion_plan(llm, prompt, params: SamplingParams) -> Plan:
    try:
        ids = llm._ids(prompt)  # the engine's own check of token ids, before any response starts
    except NinferError as e:
        raise APIError(400, str(e), "prompt") from None
    if not ids:
        raise APIError(400, "The prompt is empty; give at least one token of text.", "prompt")
    check_fits(llm, len(ids), params.max_tokens, "prompt")
    return Plan(ids, params)


class OutputParser:
    """Text deltas -> reasoning / content / tool-call events (tools only outside reasoning)."""

    def __init__(self, plan: Plan):
        self.reasoning = ReasoningParser(plan.start_in_reasoning) if plan.parse_reasoning else None
        self.tools = ToolCallParser(plan.tools) if plan.parse_tools else None
        self.n_calls = 0

    def feed(self, text: str, final: bool = False) -> list[Event]:
        thought, content = self.reasoning.feed(text) if self.reasoning else ("", text)
        if final and self.reasoning:
            r2, c2 = self.reasoning.finish()
            thought, content = thought + r2, content + c2
        out = [Event("reasoning", thought)] if thought else []
        deltas: list = []
        if self.tools:
            content, deltas = self.tools.feed(content)
            if final:
                c2, d2 = self.tools.finish()
                content, deltas = content + c2, deltas + d2
        if content:
            out.append(Event("content", content))
        self.n_calls += sum(1 for d in deltas if d.name is not None)
        return out + [Event("tool", tool=d) for d in deltas]


def _error_of(e: Exception) -> APIError:
    if isinstance(e, ContextLengthError):
        return APIError(400, str(e), "messages", "context_length_exceeded")
    if isinstance(e, NinferError):
        return APIError(400, str(e))
    return APIError(500, f"The engine failed on this request ({type(e).__name__}); see the server log.")


def submit(worker, plan: Plan) -> Job:
    """Queue the request now, so a full queue is a 429 before any response starts."""
    job = Job("req_" + uuid.uuid4().hex[:16], plan.prompt_ids, plan.params, asyncio.get_running_loop())
    try:
        worker.submit(job)
    except QueueFullError as e:
        raise APIError(429, str(e), code="rate_limit_exceeded") from None
    return job


async def run(worker, job: Job, plan: Plan, keepalive_s: float = 10.0) -> AsyncIterator[Event]:
    """Yield the events of a submitted request; leaving early (a disconnect) cancels it in the engine."""
    parser = OutputParser(plan)
    ids, text, finish = [], plan.prefill, None
    try:
        for ev in parser.feed(plan.prefill):
            yield ev
        while True:
            try:
                kind, value = await asyncio.wait_for(job.results.get(), keepalive_s)
            except asyncio.TimeoutError:
                yield Event("keepalive")  # long prefill or a queue: keep proxies and clients patient
                continue
            if kind == "error":
                yield Event("error", error=_error_of(value))
                return
            if kind == "done":
                break
            ids += value.token_ids
            text += value.text
            if value.logprobs:
                yield Event("logprobs", logprobs=value.logprobs)
            for ev in parser.feed(value.text, final=value.finish_reason is not None):
                yield ev
            finish = value.finish_reason or finish
        if finish is None:
            return
        stop_seq = None
        if finish == "stop" and plan.params.stop and ids and ids[-1] not in worker.llm.eos_token_ids:
            rest = worker.llm.tokenizer.decode(ids)[len(text) - len(plan.prefill):]
            found = [(rest.find(s), s) for s in plan.params.stop if s in rest]
            stop_seq = min(found)[1] if found else None
        if finish == "stop" and parser.n_calls:
            finish = "tool_calls"
        usage = {"prompt_tokens": len(plan.prompt_ids), "completion_tokens": len(ids)}
        yield Event("finish", finish_reason=finish, stop_sequence=stop_seq, usage=usage)
    finally:
        job.cancel.set()  # a no-op after a normal end; stops the engine when the client has gone
