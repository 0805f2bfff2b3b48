"""Registers ninfer.quant's reference implementations: grouped-int GEMMs, quantised-KV attention,
and the compressed-tensors / GPTQ checkpoint readers."""

from ..hookspecs import hookimpl
from ..ops import OpImpl
from . import kv_ops
from .layout import LAYOUTS, linear

QUANT_KV_FORMATS = ("int8", "int4", "int4_norot")


@hookimpl
def ninfer_register_gemm(register):
    from . import gpu

    for layout in LAYOUTS.values():
        register(OpImpl(op="linear", backend="reference", fn=linear, name=f"reference.linear_{layout}",
                        weight_layout=layout))
        for backend, dtypes in gpu.BACKENDS.items():  # the fused-dequant GEMV, by backend name
            register(OpImpl(op="linear", backend=backend, fn=gpu.quant_linear, weight_layout=layout, priority=10,
                            name=f"{backend}.qgemv_{layout} (T<=16) + dequant/cuBLAS (prefill)",
                            supports=lambda spec, d=dtypes: spec.type == "cuda" and spec.dtype in d))


@hookimpl
def ninfer_register_ops(register):
    for fmt in QUANT_KV_FORMATS:
        register(OpImpl(op="write_kv", backend="reference", fn=kv_ops.write_kv, name=f"reference.write_kv_{fmt}",
                        kv_format=fmt))


@hookimpl
def ninfer_register_attention(register):
    for fmt in QUANT_KV_FORMATS:
        register(OpImpl(op="paged_attention", backend="reference", fn=kv_ops.paged_attention,
                        name=f"reference.paged_attention_{fmt}", kv_format=fmt))


@hookimpl(tryfirst=True)
def ninfer_register_weight_formats(register):
    # before the plain safetensors reader, which would also accept these directories
    from .compressed_tensors import CompressedTensorsDir
    from .gptq import GPTQDir

    register(CompressedTensorsDir)
    register(GPTQDir)
