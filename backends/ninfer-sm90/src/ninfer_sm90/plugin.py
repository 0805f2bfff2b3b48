"""Registers the sm90 backend and its kernels with ninfer."""

import torch

from ninfer.hookspecs import hookimpl
from ninfer.kernels.fused import FUSED_OPS
from ninfer.kernels.ops import op_impls

from . import LIBRARY, Sm90Backend


def _runs_here(spec) -> bool:
    return Sm90Backend.check(torch.device("cuda", spec.index))[0]


def _impls(ops):
    return [i for i in op_impls("sm90", LIBRARY, _runs_here) if i.op in ops]


@hookimpl
def ninfer_register_backends(register):
    register(Sm90Backend)


@hookimpl
def ninfer_register_ops(register):
    for impl in _impls({"rms_norm", "rms_norm_gated", "rope", "silu_mul", "write_kv", "argmax",
                        "causal_conv1d_update", "gdn_recurrent", "gdn_recurrent_states", "gdn_chunked"}):
        register(impl)
    for impl in _impls(FUSED_OPS):  # drop a name from FUSED_OPS to serve that op by the reference
        register(impl)


@hookimpl
def ninfer_register_gemm(register):
    for impl in _impls({"linear"}):
        register(impl)


@hookimpl
def ninfer_register_attention(register):
    for impl in _impls({"paged_attention"}):
        register(impl)
