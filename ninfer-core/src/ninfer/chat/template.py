"""Chat templates: the Jinja template a model ships, rendered the way transformers renders it.

Templates come from downloaded files, so they run in Jinja's immutable sandbox: they can read what
they are given and nothing else. The environment matches transformers' `apply_chat_template`
(trim_blocks, lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, a JSON `tojson`), so a
prompt renders byte for byte as the model was trained on.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import NinferError

# For models that ship no template: ChatML, the format of Qwen and SmolLM.
DEFAULT_CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class TemplateRaised(Exception):
    """A template called raise_exception(message): the message is for the user."""


def _raise_exception(message):
    raise TemplateRaised(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters; templates expect plain JSON, unicode kept.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


class _Namespace(jinja2.utils.Namespace):
    """`namespace()` that refuses dunder/underscore attributes, which could reach interpreter internals."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template may not set namespace attribute {name!r}")


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = _Namespace
    return env


def _plain(value: Any) -> Any:
    """Only JSON-shaped data reaches the template: rich objects carry methods the sandbox can't vet."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if callable(getattr(value, "model_dump", None)):  # pydantic models from the server
        return _plain(value.model_dump())
    for base in (str, int, float):
        if isinstance(value, base):  # enums and other subclasses: strip to the base type
            return base(value)
    return f"<{type(value).__name__}>"


def _with_reasoning_aliases(messages: list[dict]) -> list[dict]:
    """Clients name a message's reasoning `reasoning_content`, `reasoning` or `thinking`; templates read
    `reasoning_content` (Qwen) or `thinking` (gpt-oss). Fill both, as transformers does."""
    out = []
    for m in messages:
        reasoning = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        out.append(m if reasoning is None else {"thinking": reasoning, **m, "reasoning_content": reasoning})
    return out


class ChatTemplate:
    """A compiled chat template. `render` gives the prompt text the model continues."""

    def __init__(self, source: str | None, bos_token: str | None = None, eos_token: str | None = None):
        self.source = source if source else DEFAULT_CHATML_TEMPLATE
        self.bos_token, self.eos_token = bos_token, eos_token
        try:
            self._template = _environment().from_string(self.source)
        except jinja2.TemplateSyntaxError as e:
            raise NinferError(f"The model's chat template has a syntax error at line {e.lineno} ({e.message}); "
                              "fix the template or pass one that parses.") from None

    def render(self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True,
               enable_thinking: bool | None = None, **kwargs) -> str:
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise NinferError("Chat messages must be a list of {'role': ..., 'content': ...} objects.")
        # A model without a BOS text leaves `bos_token` undefined (renders ""), as transformers does.
        special = {k: v for k, v in (("bos_token", self.bos_token), ("eos_token", self.eos_token)) if v is not None}
        context = {**special, "documents": None, **kwargs}
        if enable_thinking is not None:  # templates test `enable_thinking is defined`: only pass it when set
            context["enable_thinking"] = enable_thinking
        try:
            return self._template.render(messages=_with_reasoning_aliases(_plain(messages)), tools=_plain(tools),
                                         add_generation_prompt=add_generation_prompt, **_plain(context))
        except TemplateRaised as e:
            raise NinferError(f"The chat template refused these messages: {e}") from None
        except jinja2.exceptions.SecurityError as e:
            raise NinferError(f"The chat template tried an unsafe operation ({e}); use a trusted template.") from None
        except (jinja2.TemplateError, TypeError, KeyError, ValueError, AttributeError, IndexError) as e:
            raise NinferError(f"The chat template failed on these messages ({type(e).__name__}: {e}); "
                              "check the message roles and contents the template expects.") from None
