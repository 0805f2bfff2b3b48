"""ninfer-server: OpenAI- and Anthropic-compatible HTTP for one ninfer engine, and `ninfer serve`."""

__version__ = "0.1.0"
