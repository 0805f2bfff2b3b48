"""Reasoning split on recorded Qwen3 / Qwen3.5 outputs, one shot and streamed in random splits."""

import random

import pytest

from ninfer.chat.reasoning import ReasoningParser, prompt_opens_reasoning, split_reasoning
from ninfer.chat.tool_parsers import parse_tool_calls

# (output, starts inside reasoning, expected reasoning, expected content)
RECORDED = [
    ("<think>\nThe user greets me. I reply briefly.\n</think>\n\nHello! How can I help?", False,
     "The user greets me. I reply briefly.", "Hello! How can I help?"),
    ("<think>\n\n</think>\n\n2 + 2 = 4.", False, "", "2 + 2 = 4."),
    ("Plain answer, no thinking. A literal <think> later is text.", False, "",
     "Plain answer, no thinking. A literal <think> later is text."),
    # Qwen3.5: the template opened <think> in the prompt, so output starts inside reasoning
    ("Let me think about 日本語 🎌.\n</think>\n\nこんにちは", True, "Let me think about 日本語 🎌.", "こんにちは"),
    # max_tokens hit while still reasoning
    ("<think>\nStill thinking about a < b </thi", False, "Still thinking about a < b </thi", ""),
    # a tool call written inside reasoning is thought, not a call
    ("<think>\nI could emit <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> here.\n</think>\n\n"
     "Done without tools.", False,
     'I could emit <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call> here.', "Done without tools."),
]


def _stream(text, start, pieces):
    p = ReasoningParser(start)
    cuts = sorted(random.Random(pieces).sample(range(1, len(text)), min(pieces, len(text) - 1)))
    r = c = ""
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        dr, dc = p.feed(text[a:b])
        r, c = r + dr, c + dc
    dr, dc = p.finish()
    return r + dr, c + dc


@pytest.mark.parametrize("text,start,want_r,want_c", RECORDED)
def test_split_matches_recorded(text, start, want_r, want_c):
    assert split_reasoning(text, start) == (want_r, want_c)
    for pieces in (len(text) - 1, 2, 5, 13):
        assert _stream(text, start, pieces) == (want_r, want_c)


def test_no_tool_call_parsed_from_inside_reasoning():
    reasoning, content = split_reasoning(RECORDED[-1][0])
    assert "<tool_call>" in reasoning
    assert parse_tool_calls(content)[1] == []


def test_prompt_opens_reasoning():
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n")
    assert not prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_opens_reasoning("<|im_start|>assistant\n")
