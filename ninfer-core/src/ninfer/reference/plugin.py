"""Registers the reference backend and every reference op (the fallback for all backends)."""

from ..backends import ReferenceBackend
from ..hookspecs import hookimpl
from ..ops import OpImpl
from . import gdn
from . import ops as ref


@hookimpl
def ninfer_register_backends(register):
    register(ReferenceBackend)


@hookimpl
def ninfer_register_ops(register):
    for op, fn in ref.OPS.items():
        if op in ("linear", "paged_attention"):
            continue
        register(OpImpl(op=op, backend="reference", fn=fn, name=f"reference.{op}"))
    for op, fn in gdn.OPS.items():  # the hybrid model's ops (Gated DeltaNet)
        register(OpImpl(op=op, backend="reference", fn=fn, name=f"reference.{op}"))


@hookimpl
def ninfer_register_gemm(register):
    register(OpImpl(op="linear", backend="reference", fn=ref.linear, name="reference.linear"))


@hookimpl
def ninfer_register_attention(register):
    register(OpImpl(op="paged_attention", backend="reference", fn=ref.paged_attention,
                    name="reference.paged_attention"))
