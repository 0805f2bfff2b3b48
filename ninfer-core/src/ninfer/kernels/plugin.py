"""The hooks every kernel backend registers, written once: a backend package's plugin module is

    from ninfer.kernels.plugin import backend_hooks
    from . import Sm90Backend
    (ninfer_register_backends, ninfer_register_ops, ninfer_register_gemm,
     ninfer_register_attention) = backend_hooks(Sm90Backend)
"""

from __future__ import annotations

import torch

from ..hookspecs import hookimpl
from .fused import FUSED_OPS
from .kv_quant import kv_quant_impls
from .ops import op_impls

# ops every backend serves with its kernels (anything else falls back to the reference)
KERNEL_OPS = {"rms_norm", "rms_norm_gated", "rope", "silu_mul", "write_kv", "argmax", "sigmoid_mul",
              "causal_conv1d_update", "causal_conv1d_prefill", "gdn_recurrent", "gdn_recurrent_states",
              "gdn_chunked", "gdn_gates"}


def backend_hooks(backend_cls):
    """The four register hooks of a backend class whose ``kernels`` is its KernelLibrary."""

    def runs_here(spec) -> bool:
        return backend_cls.check(torch.device("cuda", spec.index))[0]

    def impls(ops):
        return [i for i in op_impls(backend_cls.name, backend_cls.kernels, runs_here) if i.op in ops]

    def kv_quant(op):  # write_kv / paged_attention over quantised KV pools, one OpImpl per KV format
        return [i for i in kv_quant_impls(backend_cls.name, backend_cls.kernels, runs_here) if i.op == op]

    @hookimpl
    def ninfer_register_backends(register):
        register(backend_cls)

    @hookimpl
    def ninfer_register_ops(register):
        for impl in impls(KERNEL_OPS | set(FUSED_OPS)):  # drop a name from FUSED_OPS: the reference serves it
            register(impl)
        for impl in kv_quant("write_kv"):
            register(impl)

    @hookimpl
    def ninfer_register_gemm(register):
        for impl in impls({"linear"}):
            register(impl)

    @hookimpl
    def ninfer_register_attention(register):
        for impl in impls({"paged_attention"}):
            register(impl)
        for impl in kv_quant("paged_attention"):
            register(impl)

    return ninfer_register_backends, ninfer_register_ops, ninfer_register_gemm, ninfer_register_attention
