"""Registers the built-in checkpoint readers."""

from ..hookspecs import hookimpl


@hookimpl
def ninfer_register_weight_formats(register):
    from .gguf import GGUFCheckpoint
    from .safetensors_dir import SafetensorsDir

    register(SafetensorsDir)
    register(GGUFCheckpoint)
