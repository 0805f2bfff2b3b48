"""Tool-call parsing on recorded Qwen outputs, one shot and streamed in random splits."""

import json
import random

import pytest

from ninfer.chat.tool_parsers import ToolCallParser, convert_value, parse_tool_calls

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "celsius": {"type": "boolean"},
        "threshold": {"type": "number"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "filters": {"type": "object"}, "tags": {"type": "array"},
        "limit": {"type": ["integer", "null"]}}}}},
]

CODE = 'def f():\n    s = "</function>"\n    return \'it\\\'s {ok}\'\n'

# (output as the model wrote it, expected content, expected [(name, arguments dict)])
RECORDED = [
    # Qwen2.5 / Qwen3 Hermes JSON
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
     "", [("get_weather", {"city": "Paris", "days": 3})]),
    ("Let me check both cities.\n<tool_call>\n"
     '{"name": "get_weather", "arguments": {"city": "東京", "celsius": true}}\n</tool_call>\n'
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich 🌧"}}\n</tool_call>',
     "Let me check both cities.\n",
     [("get_weather", {"city": "東京", "celsius": True}), ("get_weather", {"city": "Zürich 🌧"})]),
    ('<tool_call>\n{"name": "write_file", "arguments": ' + json.dumps({"path": "a.py", "content": CODE})
     + "}\n</tool_call>", "", [("write_file", {"path": "a.py", "content": CODE})]),
    ('<tool_call>\n{"arguments": {"query": "x"}, "name": "search"}\n</tool_call>', "",
     [("search", {"query": "x"})]),
    ('<tool_call>\n{"name": "search", "arguments": "{\\"query\\": \\"q\\"}"}\n</tool_call>', "",
     [("search", {"query": "q"})]),
    ("No tools needed: 2 < 3 and <tool is not a tag.", "No tools needed: 2 < 3 and <tool is not a tag.", []),
    # Qwen3-Coder / Qwen3.5 XML
    ("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
     "<parameter=days>\n5\n</parameter>\n<parameter=celsius>\nfalse\n</parameter>\n"
     "<parameter=threshold>\n0.5\n</parameter>\n</function>\n</tool_call>", "",
     [("get_weather", {"city": "San Francisco", "days": 5, "celsius": False, "threshold": 0.5})]),
    ("I'll write it.\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
     "<parameter=content>\n" + CODE + "\n</parameter>\n</function>\n</tool_call>", "I'll write it.\n\n",
     [("write_file", {"path": "src/app.py", "content": CODE})]),
    ("<tool_call>\n<function=search>\n<parameter=query>\n\"quoted\" — naïve café ☕\n</parameter>\n"
     '<parameter=filters>\n{"lang": "py", "stars": 10}\n</parameter>\n<parameter=tags>\n["a", "b"]\n'
     "</parameter>\n<parameter=limit>\nnull\n</parameter>\n</function>\n</tool_call>\n"
     "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>", "",
     [("search", {"query": '"quoted" — naïve café ☕', "filters": {"lang": "py", "stars": 10},
                  "tags": ["a", "b"], "limit": None}), ("get_weather", {})]),
    # cut off before </tool_call> (a stop string ate it, or max_tokens)
    ("<tool_call>\n<function=write_file>\n<parameter=path>\nx.txt\n</parameter>\n<parameter=content>\nhello\n",
     "", [("write_file", {"path": "x.txt", "content": "hello"})]),
]


def _stream(text, pieces):
    parser = ToolCallParser(TOOLS)
    content, calls = "", {}
    cuts = sorted(random.Random(pieces).sample(range(1, len(text)), min(pieces, len(text) - 1)))
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        c, deltas = parser.feed(text[a:b])
        content += c
        for d in deltas:
            if d.name is not None:
                assert d.index not in calls and d.id, "the name comes first, once, with the id"
                calls[d.index] = [d.name, ""]
            calls[d.index][1] += d.arguments
    c, deltas = parser.finish()
    content += c
    for d in deltas:
        calls[d.index][1] += d.arguments
    return content, [tuple(calls[i]) for i in sorted(calls)]


@pytest.mark.parametrize("text,want_content,want_calls", RECORDED)
def test_one_shot_matches_recorded(text, want_content, want_calls):
    content, calls = parse_tool_calls(text, TOOLS)
    assert content == want_content
    assert [(c.name, json.loads(c.arguments)) for c in calls] == want_calls
    assert "<tool_call>" not in content and "<function=" not in content


@pytest.mark.parametrize("text,want_content,want_calls", RECORDED)
def test_streaming_in_random_splits_equals_one_shot(text, want_content, want_calls):
    content, calls = parse_tool_calls(text, TOOLS)
    for pieces in (len(text) - 1, 2, 3, 7, 25):  # every character alone, then random cuts
        s_content, s_calls = _stream(text, pieces)
        assert s_content == content
        assert s_calls == [(c.name, c.arguments) for c in calls]


def test_string_arguments_stream_before_the_value_ends():
    parser = ToolCallParser(TOOLS)
    _, deltas = parser.feed("<tool_call>\n<function=write_file>\n<parameter=content>\nline one\nline")
    args = "".join(d.arguments for d in deltas)
    assert deltas[0].name == "write_file"
    assert args.startswith('{"content": "line one')  # streamed, not buffered until </parameter>


def test_convert_value_follows_schema():
    assert convert_value("007", "string") == "007"
    assert convert_value("7", "integer") == 7
    assert convert_value("7", "number") == 7 and convert_value("7.5", "number") == 7.5
    assert convert_value("True", "boolean") is True
    assert convert_value("[1, 2]", "array") == [1, 2]
    assert convert_value("not json", "object") == "not json"


@pytest.mark.parametrize("text,want_content,want_calls", [r for r in RECORDED if any(ord(c) > 127 for c in r[0])])
def test_multibyte_text_split_inside_utf8_sequences(text, want_content, want_calls):
    # byte-level tokens cut characters apart; an incremental UTF-8 decoder (as the detokenizer does)
    # hands the parser whole characters only, at whatever points the bytes allow
    import codecs

    data = text.encode()
    for seed in range(5):
        cuts = sorted(random.Random(seed).sample(range(1, len(data)), min(40, len(data) - 1)))
        decoder, parser = codecs.getincrementaldecoder("utf-8")(), ToolCallParser(TOOLS)
        content = ""
        for a, b in zip([0] + cuts, cuts + [len(data)]):
            content += parser.feed(decoder.decode(data[a:b]))[0]
        content += parser.finish()[0]
        assert content == want_content
        assert [(c.name, json.loads(c.arguments)) for c in parser.calls] == want_calls
