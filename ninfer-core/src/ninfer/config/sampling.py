"""Sampling settings for one request."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NinferError


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # over prompt and output (HF/vLLM semantics)
    presence_penalty: float = 0.0  # over output tokens (OpenAI semantics)
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int | None = 256  # None: up to the end of the context
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None  # top-n logprobs per generated token
    response_format: str | None = None  # "json_object": the output is one JSON object (engine/json_mode.py);
    # "json_schema": one JSON document valid against json_schema (engine/json_schema.py; implied by json_schema)
    json_schema: dict | bool | None = None
    # the output begins with one of these strings, then goes on freely (engine/json_mode.py: StartsWith); the server
    # names a forced tool call's function with it when several tools may be called
    starts_with: tuple[str, ...] = ()
    # with json_schema: the text that must follow the document before the output ends (engine/json_schema.py:
    # JsonThen); the server closes a forced tool call with it ("</tool_call>")
    json_then: str = ""

    def __post_init__(self):
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in (self.stop or []) if s]
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.json_schema is not None and self.response_format is None:
            self.response_format = "json_schema"
        if isinstance(self.starts_with, str):
            self.starts_with = (self.starts_with,)
        self.starts_with = tuple(self.starts_with or ())
        self.validate()

    def validate(self) -> None:
        def bad(msg):
            raise NinferError(msg)

        for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                bad(f"{name} must be a number, got {v!r}.")
        for name in ("top_k", "max_tokens", "seed", "logprobs"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                bad(f"{name} must be a whole number, got {v!r}.")

        if self.temperature < 0:
            bad(f"temperature must be >= 0, got {self.temperature}; use 0 for greedy decoding.")
        if not 0 < self.top_p <= 1:
            bad(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < 0:
            bad(f"top_k must be >= 0 (0 turns it off), got {self.top_k}.")
        if not 0 <= self.min_p <= 1:
            bad(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.repetition_penalty <= 0:
            bad(f"repetition_penalty must be > 0 (1 turns it off), got {self.repetition_penalty}.")
        if not -2 <= self.presence_penalty <= 2 or not -2 <= self.frequency_penalty <= 2:
            bad("presence_penalty and frequency_penalty must be in [-2, 2].")
        if self.max_tokens is not None and self.max_tokens < 1:
            bad(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.seed is not None and not -2 ** 63 <= self.seed < 2 ** 64:
            bad(f"seed must be a 64-bit integer (between -2**63 and 2**64 - 1), got {self.seed}.")
        if self.response_format not in (None, "text", "json_object", "json_schema"):
            bad(f"response_format must be text, json_object or json_schema, got {self.response_format!r}.")
        if self.response_format in ("json_object", "json_schema") and self.ignore_eos:
            bad(f"ignore_eos cannot go with response_format {self.response_format}: the document's end ends the "
                "output.")
        if (self.response_format == "json_schema") != (self.json_schema is not None):
            bad("response_format json_schema needs json_schema (the schema), and json_schema goes only with it.")
        if self.json_schema is not None:
            from ..engine.json_schema import check_schema

            check_schema(self.json_schema)
        if not all(isinstance(c, str) and c for c in self.starts_with):
            bad("starts_with must be non-empty strings.")
        if self.starts_with and self.response_format in ("json_object", "json_schema"):
            bad(f"starts_with cannot go with response_format {self.response_format}; give one or the other.")
        if not isinstance(self.json_then, str) or (self.json_then and self.json_schema is None):
            bad("json_then is the text after a json_schema document: a string, and only with json_schema.")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            bad(f"logprobs must be between 0 and 20, got {self.logprobs}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1
