"""Quantised weights (groupwise int8 / int4) and quantised KV caches (int8, rotated int4).

- :mod:`.layout`: the internal weight layout ``QuantWeight``, its reference dequantise and GEMM.
- :mod:`.compressed_tensors`, :mod:`.gptq`, :mod:`.gguf_repack`: readers that repack into it.
- :mod:`.quantize`: ``ninfer quantize`` (RTN / GPTQ) writing compressed-tensors checkpoints.
- :mod:`.kv_cache`, :mod:`.kv_ops`: KV formats and their reference write / attention.
- :mod:`.capacity`: the largest context a memory budget holds; :mod:`.perplexity`: accuracy checks.
"""

from .layout import QuantWeight, dequantize, quantize_rtn

__all__ = ["QuantWeight", "dequantize", "quantize_rtn"]
