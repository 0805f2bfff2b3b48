"""ninfer: fast single-GPU inference for Qwen-family models, one plugin backend per GPU generation."""

__version__ = "0.1.0"

from .config.sampling import SamplingParams  # noqa: E402
from .errors import NinferError  # noqa: E402
from .hookspecs import hookimpl  # noqa: E402


def __getattr__(name):
    if name == "LLM":  # lazy: `import ninfer` for a plugin must not load torch-heavy modules twice
        from .llm import LLM

        return LLM
    raise AttributeError(name)


__all__ = ["LLM", "SamplingParams", "NinferError", "hookimpl", "__version__"]
