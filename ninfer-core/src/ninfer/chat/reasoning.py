"""Split model output into reasoning (``<think>...</think>``) and the answer, as text streams in.

Qwen3 writes ``<think>\\n...\\n</think>\\n\\n`` at the start of its output; Qwen3.5-style templates
open ``<think>`` in the prompt already, so the output starts inside reasoning
(``start_in_reasoning=True``). Only a ``<think>`` at the very start of the output opens reasoning:
a tag quoted later in an answer is answer text. The parser is split-invariant: any way of cutting
the same output into deltas gives the same concatenated reasoning and content.
"""

from __future__ import annotations

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag`` (held back)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def prompt_opens_reasoning(prompt: str) -> bool:
    """True when the rendered prompt ends inside an open ``<think>`` (Qwen3.5 thinking mode)."""
    tail = prompt.rstrip()
    return tail.endswith(OPEN_TAG)


class ReasoningParser:
    """Feed text deltas; get ``(reasoning_delta, content_delta)`` back.

    Reasoning is stripped of surrounding whitespace; the answer after ``</think>`` is stripped of
    its leading whitespace.
    """

    def __init__(self, start_in_reasoning: bool = False):
        # "start": may still open <think>; "reasoning": inside; "content": answer text
        self.state = "reasoning" if start_in_reasoning else "start"
        self.buf = ""  # text not yet classified (a possible tag prefix or held whitespace)
        self.reasoning_started = False  # leading whitespace of reasoning is dropped until True
        self.skip_ws = False  # drop whitespace right after </think>

    def feed(self, text: str) -> tuple[str, str]:
        self.buf += text
        reasoning, content = "", ""
        while True:
            if self.state == "start":
                head = self.buf.lstrip()
                if head.startswith(OPEN_TAG):
                    self.buf = head[len(OPEN_TAG):]
                    self.state = "reasoning"
                    continue
                if OPEN_TAG.startswith(head):  # still could be the tag (or only whitespace)
                    break
                self.state = "content"
                continue
            if self.state == "reasoning":
                r, done = self._take_reasoning()
                reasoning += r
                if done:
                    self.state, self.skip_ws = "content", True
                    continue
                break
            # content
            if self.skip_ws:
                self.buf = self.buf.lstrip()
                if not self.buf:
                    break
                self.skip_ws = False
            content += self.buf
            self.buf = ""
            break
        return reasoning, content

    def _take_reasoning(self) -> tuple[str, bool]:
        """Emit reasoning text from the buffer; True once ``</think>`` has been consumed."""
        end = self.buf.find(CLOSE_TAG)
        if end >= 0:
            body, self.buf = self.buf[:end], self.buf[end + len(CLOSE_TAG):]
            return self._emit_reasoning(body.rstrip()), True
        hold = partial_suffix(self.buf, CLOSE_TAG)
        body = self.buf[: len(self.buf) - hold]
        # trailing whitespace is held too: it is dropped if </think> follows it
        stripped = body.rstrip()
        self.buf = body[len(stripped):] + self.buf[len(body):]
        return self._emit_reasoning(stripped), False

    def _emit_reasoning(self, body: str) -> str:
        if not self.reasoning_started:
            body = body.lstrip()
            self.reasoning_started = bool(body)
        return body

    def finish(self) -> tuple[str, str]:
        """Flush what was held back at the end of the output."""
        buf, self.buf = self.buf, ""
        if self.state == "reasoning":
            return self._emit_reasoning(buf.rstrip()), ""
        if self.state == "start" or (self.state == "content" and not self.skip_ws):
            return "", buf
        return "", buf.lstrip()


def split_reasoning(text: str, start_in_reasoning: bool = False) -> tuple[str, str]:
    """One-shot split of a whole output into ``(reasoning, content)``."""
    p = ReasoningParser(start_in_reasoning)
    r1, c1 = p.feed(text)
    r2, c2 = p.finish()
    return r1 + r2, c1 + c2
