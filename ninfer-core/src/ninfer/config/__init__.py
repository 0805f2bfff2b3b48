"""Engine, model and sampling settings."""

from .model import ModelConfig
from .sampling import SamplingParams

__all__ = ["ModelConfig", "SamplingParams"]
