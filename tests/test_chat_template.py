"""ChatTemplate renders exactly what transformers' apply_chat_template renders, refuses unsafe
templates, and reports template errors as one NinferError."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from ninfer.chat.template import DEFAULT_CHATML_TEMPLATE, ChatTemplate
from ninfer.errors import NinferError
from ninfer.weights.gguf import GGUFCheckpoint

# A Qwen3-style template (tools block, multi-step tool detection, <think> handling, enable_thinking),
# written after the structure of the public Qwen3 tokenizer_config.json chat_template.
QWEN3_STYLE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nReturn a json object with the function name and arguments within <tool_call></tool_call>.<|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string
          and not (message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content if message.content is string else '' %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}
            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\\n' + content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls or [] %}
            {%- if (loop.first and content) or not loop.first %}{{- '\\n' }}{%- endif %}
            {%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}
            {{- '<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
            {{- tool_call.arguments if tool_call.arguments is string else tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or messages[loop.index0 - 1].role != "tool" %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != "tool" %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city — «quoted», 東京 too.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
                   "required": ["city"]}}}]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3? 日本語 😀"}],
    [{"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": "", "tool_calls": [
         {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}}]},
     {"role": "tool", "content": '{"temp": 21}'},
     {"role": "assistant", "content": "<think>\nIt is 21.\n</think>\n\nIt is 21 °C."},
     {"role": "user", "content": "Thanks"}],
    [{"role": "user", "content": "Plan"},
     {"role": "assistant", "content": "Done.", "reasoning_content": "thinking hard"}],
    [{"role": "user", "content": "Why?"},  # clients also name reasoning "reasoning": aliased as transformers does
     {"role": "assistant", "content": "Because.", "reasoning": "short thought"}],
]


def _transformers_render(template, messages, bos="<|im_start|>", eos="<|im_end|>", **kwargs):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token=bos, eos_token=eos)
    return tok.apply_chat_template(messages, chat_template=template, tokenize=False, **kwargs)


@pytest.fixture(scope="module")
def smollm2_template(smollm2_gguf):
    ckpt = GGUFCheckpoint.open(smollm2_gguf)
    return ckpt.chat_template, ckpt.special_tokens()


@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_smollm2_template_equals_transformers(smollm2_template, add_generation_prompt):
    source, special = smollm2_template
    template = ChatTemplate(source, **special)
    for messages in CONVERSATIONS[:2]:
        ours = template.render(messages, add_generation_prompt=add_generation_prompt)
        ref = _transformers_render(source, messages, special["bos_token"], special["eos_token"],
                                   add_generation_prompt=add_generation_prompt)
        assert ours == ref


@pytest.mark.parametrize("enable_thinking", [None, True, False])
@pytest.mark.parametrize("with_tools", [False, True])
def test_qwen3_style_template_equals_transformers(enable_thinking, with_tools):
    template = ChatTemplate(QWEN3_STYLE, eos_token="<|im_end|>")
    tools = TOOLS if with_tools else None
    for messages in CONVERSATIONS:
        kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
        ours = template.render(messages, tools=tools, add_generation_prompt=True, enable_thinking=enable_thinking)
        ref = _transformers_render(QWEN3_STYLE, messages, tools=tools, add_generation_prompt=True, **kwargs)
        assert ours == ref
        if with_tools:
            assert "東京" in ours  # tojson keeps unicode, as transformers does
        if messages is CONVERSATIONS[-1]:
            assert "<think>\nshort thought\n</think>" in ours
        if enable_thinking is False:
            assert ours.endswith("<think>\n\n</think>\n\n")


def test_tojson_loopcontrols_and_strftime_match_transformers():
    source = ("{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
              "{% if m.skip %}{% continue %}{% endif %}{{ m | tojson(indent=2) }}|{{ m | tojson(sort_keys=True) }}|"
              "{% endfor %}{{ strftime_now('%Y') }}")
    messages = [{"role": "user", "content": "é <b>&"}, {"role": "x", "skip": True, "content": ""},
                {"role": "assistant", "content": "ok"}]
    ours = ChatTemplate(source).render(messages)
    assert ours == _transformers_render(source, messages)
    assert json.dumps(messages[0], ensure_ascii=False, indent=2) in ours
    assert ours.endswith(str(datetime.now().year))


def test_missing_special_tokens_render_empty_like_transformers():
    source = "[{{ bos_token }}]{% for m in messages %}{{ m.content }}{% endfor %}[{{ eos_token }}]"
    messages = [{"role": "user", "content": "x"}]
    assert ChatTemplate(source).render(messages) == _transformers_render(source, messages, None, None) == "[]x[]"
    assert ChatTemplate(source, "<s>", "</s>").render(messages) == _transformers_render(source, messages, "<s>", "</s>")


def test_default_template_is_chatml():
    messages = CONVERSATIONS[1]
    ours = ChatTemplate(None).render(messages)
    assert ours == _transformers_render(DEFAULT_CHATML_TEMPLATE, messages, add_generation_prompt=True)
    assert ours.count("<|im_start|>") == len(messages) + 1 and ours.endswith("<|im_start|>assistant\n")


def test_template_errors_are_one_ninfer_error():
    refusing = "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}{% endif %}"
    with pytest.raises(NinferError, match="must start with a user turn"):
        ChatTemplate(refusing).render([{"role": "assistant", "content": "hi"}])
    with pytest.raises(NinferError, match="syntax error at line 1"):
        ChatTemplate("{% for m in messages %}{{ m }")
    with pytest.raises(NinferError, match="failed on these messages"):
        ChatTemplate("{{ messages[0]['content'] + 1 }}").render([{"role": "user", "content": "x"}])
    with pytest.raises(NinferError, match="list of"):
        ChatTemplate(None).render("just a string")


def test_sandbox_blocks_escapes_and_mutation():
    messages = [{"role": "user", "content": "x"}]
    for source in ("{{ messages.__class__.__mro__ }}", "{{ ''.__class__.__base__.__subclasses__() }}",
                   "{% set _ = messages.append(1) %}", "{% set ns = namespace(_x=1) %}"):
        with pytest.raises(NinferError, match="unsafe operation"):
            ChatTemplate(source).render(messages)
