"""Chat: the model's own Jinja chat template rendered in a sandbox, and the tool-call and reasoning
parsers shared by the engine and the server."""

from .template import DEFAULT_CHATML_TEMPLATE, ChatTemplate

__all__ = ["ChatTemplate", "DEFAULT_CHATML_TEMPLATE"]
