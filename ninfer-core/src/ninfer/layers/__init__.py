"""Layers compose ops; they never call kernels directly. ``MIXERS`` maps a layer type to its mixer."""

MIXERS: dict[str, type] = {}


def register_mixer(layer_type: str):
    def deco(cls):
        MIXERS[layer_type] = cls
        return cls

    return deco
