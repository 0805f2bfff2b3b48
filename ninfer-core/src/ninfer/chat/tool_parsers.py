"""Parse tool calls out of Qwen-family output, as text streams in or in one shot.

Two forms, told apart per call by what follows ``<tool_call>``:
- Hermes JSON (Qwen2.5, Qwen3): ``<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>``
- Qwen3-Coder XML (Qwen3.5+): ``<tool_call>\\n<function=f>\\n<parameter=p>\\nVALUE\\n</parameter>\\n
  </function>\\n</tool_call>``, each VALUE converted by the tool's JSON schema.

The parser turns text deltas into content deltas and :class:`ToolCallDelta` s (name first, then
argument fragments that concatenate to the call's JSON arguments). Tag text never reaches content.
It is split-invariant: any cut of the same output gives the same content and the same calls, so the
one-shot :func:`parse_tool_calls` is the streaming parser fed once.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from .reasoning import partial_suffix

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FN_OPEN, FN_CLOSE = "<function=", "</function>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
# a Hermes call whose name is known and whose arguments value has begun
HERMES_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(?=\S)')


@dataclass
class ToolCallDelta:
    index: int
    id: str | None = None  # only on a call's first delta, with its name
    name: str | None = None
    arguments: str = ""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text


def _param_types(tools) -> dict[str, dict[str, object]]:
    """{function name: {parameter name: JSON schema type}} from OpenAI-shaped tools."""
    out: dict[str, dict[str, object]] = {}
    for tool in tools or []:
        fn = tool.get("function", tool)
        props = (fn.get("parameters") or fn.get("input_schema") or {}).get("properties") or {}
        out[fn.get("name", "")] = {k: (v or {}).get("type") for k, v in props.items()}
    return out


def convert_value(text: str, schema_type) -> object:
    """Turn a Qwen3-Coder parameter's text into the JSON value its schema asks for."""
    types = schema_type if isinstance(schema_type, list) else [schema_type]
    if text.strip() == "null" and ("null" in types or schema_type is None):
        return None
    if "string" in types:
        return text
    for t in types:
        try:
            if t == "integer":
                return int(text.strip())
            if t == "number":
                v = float(text.strip())
                return int(v) if v.is_integer() and re.fullmatch(r"-?\d+", text.strip()) else v
            if t == "boolean" and text.strip().lower() in ("true", "false"):
                return text.strip().lower() == "true"
            if t in ("object", "array", None):
                return json.loads(text)
        except ValueError:
            continue
    return text


class ToolCallParser:
    """Feed text deltas; get ``(content_delta, [ToolCallDelta])`` back; :meth:`finish` at the end."""

    def __init__(self, tools=None, new_id=None):
        self.types = _param_types(tools)
        self.new_id = new_id or (lambda: "call_" + uuid.uuid4().hex[:24])
        self.calls: list[ToolCall] = []
        self.state = "text"  # text | open | hermes | hermes_args | xml_head | xml_params | xml_value | tail
        self.buf = ""
        self.pending_ws = ""  # whitespace between calls: kept only if real text follows
        self.deltas: list[ToolCallDelta] = []
        self.content = ""

    # -- emitting -------------------------------------------------------------------------------
    def _start(self, name: str) -> None:
        self.calls.append(ToolCall(self.new_id(), name, ""))
        self.deltas.append(ToolCallDelta(len(self.calls) - 1, self.calls[-1].id, name))

    def _args(self, fragment: str) -> None:
        if fragment:
            self.calls[-1].arguments += fragment
            self.deltas.append(ToolCallDelta(len(self.calls) - 1, arguments=fragment))

    # -- the state machine ----------------------------------------------------------------------
    def feed(self, text: str) -> tuple[str, list[ToolCallDelta]]:
        self.buf += text
        while getattr(self, "_step_" + self.state)():
            pass
        return self._drain()

    def _drain(self) -> tuple[str, list[ToolCallDelta]]:
        content, deltas = self.content, self.deltas
        self.content, self.deltas = "", []
        return content, deltas

    def _emit_content(self, text: str) -> None:
        if not self.calls:
            self.content += text
        elif text.strip():  # real text after a call: keep it with the whitespace before it
            body = text.rstrip()
            self.content += self.pending_ws + body
            self.pending_ws = text[len(body):]
        else:
            self.pending_ws += text

    def _step_text(self) -> bool:
        at = self.buf.find(CALL_OPEN)
        if at < 0:
            hold = partial_suffix(self.buf, CALL_OPEN)
            self._emit_content(self.buf[: len(self.buf) - hold])
            self.buf = self.buf[len(self.buf) - hold:]
            return False
        self._emit_content(self.buf[:at])
        self.buf, self.state = self.buf[at + len(CALL_OPEN):], "open"
        return True

    def _step_open(self) -> bool:
        head = self.buf.lstrip()
        if head.startswith(FN_OPEN):
            self.buf, self.state = head[len(FN_OPEN):], "xml_head"
            return True
        if head.startswith("{"):
            self.state = "hermes"
            return True
        if head and not FN_OPEN.startswith(head):
            self.state = "hermes"  # malformed: collected whole and dropped unless it parses
            return True
        return False

    # Hermes JSON
    def _step_hermes(self) -> bool:
        m = HERMES_HEAD.match(self.buf)
        if m:
            self._start(json.loads('"' + m.group(1) + '"'))
            self.buf = self.buf[m.end():]
            self.depth, self.in_str, self.esc = 0, False, False
            self.state = "hermes_args" if self.buf[0] in "{[" else "hermes_rawargs"
            return True
        end = self.buf.find(CALL_CLOSE)
        if end < 0:
            return False
        body, self.buf, self.state = self.buf[:end], self.buf[end + len(CALL_CLOSE):], "text"
        try:  # keys in another order: parse the call whole
            call = json.loads(body)
            args = call.get("arguments", call.get("parameters", {}))
            name = call["name"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return True  # not a tool call after all; its text is not content either
        self._start(name)
        self._args(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        return True

    def _step_hermes_rawargs(self) -> bool:
        # arguments given as a JSON string (or a bare value): decode it whole at </tool_call>
        end = self.buf.find(CALL_CLOSE)
        if end < 0:
            return False
        raw = self.buf[:end].rstrip().removesuffix("}").strip()
        self.buf, self.state = self.buf[end + len(CALL_CLOSE):], "text"
        try:
            val = json.loads(raw)
            self._args(val if isinstance(val, str) else json.dumps(val, ensure_ascii=False))
        except ValueError:
            self._args(raw)
        return True

    def _step_hermes_args(self) -> bool:
        # scan the arguments object, string- and escape-aware, up to its closing bracket
        for i, ch in enumerate(self.buf):
            if self.in_str:
                if self.esc:
                    self.esc = False
                elif ch == "\\":
                    self.esc = True
                elif ch == '"':
                    self.in_str = False
            elif ch == '"':
                self.in_str = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    self._args(self.buf[: i + 1])
                    self.buf, self.state = self.buf[i + 1:], "tail"
                    return True
        self._args(self.buf)
        self.buf = ""
        return False

    # Qwen3-Coder XML
    def _step_xml_head(self) -> bool:
        end = self.buf.find(">")
        if end < 0:
            return False
        self._start(self.buf[:end].strip())
        self.fn_types = self.types.get(self.calls[-1].name, {})
        self.n_params, self.buf, self.state = 0, self.buf[end + 1:], "xml_params"
        return True

    def _step_xml_params(self) -> bool:
        head = self.buf.lstrip()
        if head.startswith(PARAM_OPEN):
            end = head.find(">")
            if end < 0:
                return False
            self.param = head[len(PARAM_OPEN):end].strip()
            self._args(("{" if self.n_params == 0 else ", ") + json.dumps(self.param, ensure_ascii=False) + ": ")
            self.n_params += 1
            self.ptype = self.fn_types.get(self.param)
            ptypes = self.ptype if isinstance(self.ptype, list) else [self.ptype]
            self.streams_string = "string" in ptypes and "null" not in ptypes
            if self.streams_string:
                self._args('"')
            self.value, self.value_started = "", False
            self.buf, self.state = head[end + 1:], "xml_value"
            return True
        for tag in (FN_CLOSE, CALL_CLOSE):
            if head.startswith(tag):
                self._args("}" if self.n_params else "{}")
                self.buf, self.state = head[len(tag):] if tag == FN_CLOSE else head, "tail"
                return True
        if head and not any(t.startswith(head[: len(t)]) for t in (PARAM_OPEN, FN_CLOSE, CALL_CLOSE)):
            self.buf = head[1:]  # stray text between parameters
            return True
        return False

    def _step_xml_value(self) -> bool:
        if not self.value_started:  # the newline right after <parameter=p> is layout, not value
            if not self.buf:
                return False
            self.buf, self.value_started = self.buf.removeprefix("\n"), True
        end = self.buf.find(PARAM_CLOSE)
        if end >= 0:
            self._value_text(self.buf[:end].removesuffix("\n"), final=True)
            self.buf, self.state = self.buf[end + len(PARAM_CLOSE):], "xml_params"
            return True
        hold = partial_suffix(self.buf, PARAM_CLOSE)
        if hold == 0 and self.buf.endswith("\n"):
            hold = 1  # may be the layout newline before </parameter>
        elif hold and self.buf[: len(self.buf) - hold].endswith("\n"):
            hold += 1
        self._value_text(self.buf[: len(self.buf) - hold], final=False)
        self.buf = self.buf[len(self.buf) - hold:]
        return False

    def _value_text(self, text: str, final: bool) -> None:
        if self.streams_string:
            self._args(json.dumps(text, ensure_ascii=False)[1:-1] + ('"' if final else ""))
            return
        self.value += text
        if final:
            self._args(json.dumps(convert_value(self.value, self.ptype), ensure_ascii=False))

    def _step_tail(self) -> bool:
        end = self.buf.find(CALL_CLOSE)
        if end < 0:
            self.buf = self.buf[len(self.buf) - partial_suffix(self.buf, CALL_CLOSE):]
            return False
        self.buf, self.state = self.buf[end + len(CALL_CLOSE):], "text"
        return True

    def finish(self) -> tuple[str, list[ToolCallDelta]]:
        """End of output: flush held text and close a call the model left open."""
        if self.state == "xml_value":
            rest = self.buf
            for tag in (CALL_CLOSE, FN_CLOSE):
                rest = rest.rstrip().removesuffix(tag)
            self.buf = ""
            self._value_text(rest.removesuffix("\n"), final=True)
            self.state = "xml_params"
        if self.state == "text":
            self._emit_content(self.buf)
        elif self.state != "hermes_args":  # a missing </tool_call> (e.g. it was a stop string)
            return self.feed(CALL_CLOSE)
        self.buf, self.state = "", "text"
        return self._drain()


def parse_tool_calls(text: str, tools=None) -> tuple[str, list[ToolCall]]:
    """One-shot: ``(content, calls)`` of a whole output."""
    parser = ToolCallParser(tools)
    content, _ = parser.feed(text)
    rest, _ = parser.finish()
    return content + rest, parser.calls
