"""Registers the sm86 backend and its kernels with ninfer (the hooks are shared by every backend)."""

from ninfer.kernels.plugin import backend_hooks

from . import Sm86Backend

(ninfer_register_backends, ninfer_register_ops, ninfer_register_gemm,
 ninfer_register_attention) = backend_hooks(Sm86Backend)
