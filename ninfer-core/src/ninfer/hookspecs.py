"""The plugin contracts. Plugins only register; the core validates and chooses.

Every hook takes a ``register`` callback (the style of simonw/llm), except
``ninfer_register_commands`` which receives the click group to add commands to.
"""

import pluggy

hookspec = pluggy.HookspecMarker("ninfer")
hookimpl = pluggy.HookimplMarker("ninfer")


@hookspec
def ninfer_register_backends(register):
    """Register backend classes: ``register(BackendClass)``.

    A backend (subclass of :class:`ninfer.backends.Backend`) declares the compute capabilities it
    serves and whether it can run on this machine.
    """


@hookspec
def ninfer_register_ops(register):
    """Register op implementations: ``register(OpImpl(op=..., backend=..., fn=...))``.

    Ops are the ones the reference backend defines (``ninfer.reference.ops.OPS``): norms, rope,
    activations, conv1d, gated delta net, sampling. GEMM and attention have their own hooks.
    """


@hookspec
def ninfer_register_gemm(register):
    """Register GEMM implementations ``y = x @ W^T``: ``register(OpImpl(op="linear", ...))``.

    ``OpImpl.weight_layout`` names the on-device weight layout it consumes ("dense" for plain
    bf16/fp16/fp32 weights; quantized layouts name their format).
    """


@hookspec
def ninfer_register_attention(register):
    """Register attention implementations: ``register(OpImpl(op="paged_attention", ...))``.

    ``OpImpl.kv_format`` names the KV-cache format and ``OpImpl.phases`` the phases
    (``prefill``, ``decode``, ``verify``) it serves.
    """


@hookspec
def ninfer_register_weight_formats(register):
    """Register checkpoint readers: ``register(ReaderClass)``.

    A reader has ``name``, ``can_open(path) -> bool`` and ``open(path) -> Checkpoint``.
    """


@hookspec
def ninfer_register_drafters(register):
    """Register drafter classes (subclasses of :class:`ninfer.drafting.Drafter`): ``register(cls)``."""


@hookspec
def ninfer_register_commands(cli):
    """Add click commands to the ``ninfer`` command group ``cli``."""
