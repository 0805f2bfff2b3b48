"""Incremental detokenization: text deltas from a growing list of token ids.

A byte-level token may end inside a UTF-8 character, and SentencePiece decoders strip or add spaces
depending on the tokens around one, so a token cannot be decoded alone. As in vLLM, we decode a small
window twice, [prefix_offset:read_offset] and [prefix_offset:], and emit the difference; the window
slides forward after each emission, so each step costs O(1) in the length of the text. While the
window's text ends in U+FFFD the last character is incomplete: hold it back until more bytes come.
SentencePiece byte-fallback tokens (<0xE6>) are decoded a whole run at a time, so a run is held back
until a token that ends it arrives, and a window never starts inside a run. Special tokens that
decode() skips are transparent to a run, so they wait with it.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer, skip_special_tokens: bool = False):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self.prefix_offset = 0  # window start: context for the decoder, already emitted
        self.read_offset = 0  # tokens before this have been emitted
        self._hold_ids = getattr(tokenizer, "byte_fallback_ids", frozenset())
        if skip_special_tokens and self._hold_ids:
            self._hold_ids = self._hold_ids | getattr(tokenizer, "special_token_ids", frozenset())

    def _decode(self, start: int, end: int | None = None) -> str:
        return self.tokenizer.decode(self.ids[start:end], skip_special_tokens=self.skip_special_tokens)

    def add(self, token_id: int) -> str:
        """Append one token; return the text it completes ("" while a character is still partial)."""
        self.ids.append(int(token_id))
        if int(token_id) in self._hold_ids:
            return ""  # a byte run is final only once a text token ends it
        prefix_text = self._decode(self.prefix_offset, self.read_offset)
        new_text = self._decode(self.prefix_offset)
        if len(new_text) <= len(prefix_text) or new_text.endswith(REPLACEMENT):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return new_text[len(prefix_text):]

    def flush(self) -> str:
        """The text still held back (an incomplete character decodes as U+FFFD, as in decode())."""
        prefix_text = self._decode(self.prefix_offset, self.read_offset)
        new_text = self._decode(self.prefix_offset)
        self.prefix_offset = self.read_offset = len(self.ids)
        return new_text[len(prefix_text):]
