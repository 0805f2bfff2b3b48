"""The grouped-int GEMV on CUDA: compile ``kernels/qgemv.cu`` with the core's NVRTC toolchain, launch
it for decode/verify widths, and fall back to dequantise + cuBLAS for prefill.

Registered for every GPU backend by name (``quant.plugin``); the shared headers come from
``ninfer/kernels/include``, so the kernel meets the same build rules as the backends' own.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from .layout import QuantWeight, dequantize

SOURCE = Path(__file__).parent / "kernels" / "qgemv.cu"
WIDTHS = (1, 2, 4, 8, 16)
MAX_TOKENS = 16
WARPS = 4
BACKENDS = {"sm75": (torch.float16,), "sm86": (torch.bfloat16, torch.float16), "sm89": (torch.bfloat16, torch.float16),
            "sm90": (torch.bfloat16, torch.float16), "sm120": (torch.bfloat16, torch.float16)}
_SUFFIX = {torch.float16: "f16", torch.bfloat16: "bf16"}
_modules: dict[int, object] = {}
_lock = threading.Lock()


def _include_dir() -> str:
    from .. import kernels

    return str(Path(kernels.__file__).parent / "include")


def options(arch: str) -> tuple[str, ...]:
    return ("-DQG_NO_BF16",) if arch == "sm_75" else ()


def compile_for(arch: str, use_cache: bool = True) -> bytes:
    """The cubin for ``arch`` ('sm_90'); needs no GPU."""
    from ..kernels.nvrtc import compile_cubin

    cubin, _ = compile_cubin(SOURCE.read_text(), "ninfer_qgemv", arch, options(arch),
                             include_dirs=(_include_dir(),), use_cache=use_cache, progress=False)
    return cubin


def kernel_names(arch: str) -> list[str]:
    dts = ("f16",) if arch == "sm_75" else ("f16", "bf16")
    return [f"qgemv_{s}_b{b}_t{t}" for s in dts for b in (8, 4) for t in WIDTHS]


def _module(device: torch.device):
    from ..kernels.launch import Module

    idx = device.index if device.index is not None else torch.cuda.current_device()
    with _lock:
        if idx not in _modules:
            major, minor = torch.cuda.get_device_capability(idx)
            _modules[idx] = Module(compile_for(f"sm_{major}{minor}"), idx, label="ninfer-qgemv")
    return _modules[idx]


def gpu_params(w: QuantWeight) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 scale and offset [N, G] with W = u * s + o, made once per weight and kept on it."""
    cached = getattr(w, "_gpu_params", None)
    if cached is not None:
        return cached
    s = w.scales.float()
    if w.mins is not None:
        o = w.mins.float()
    elif w.zeros is not None:
        o = -w.zeros.float() * s
    else:
        o = -float(1 << (w.bits - 1)) * s
    w._gpu_params = (s.contiguous(), o.contiguous())
    return w._gpu_params


def _width(t: int) -> int:
    return next(w for w in WIDTHS if w >= t)


def quant_linear(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ dequant(W)^T (+ b). x: [..., K] fp16/bf16 on CUDA -> [..., N]."""
    k, n = w.in_features, w.qweight.shape[0]
    if w.perm is not None:
        x = x.index_select(-1, w.perm)
    x2 = x.reshape(-1, k)  # [T, K]
    t = x2.shape[0]
    per = 128 // w.bits
    if (not x.is_cuda or x.dtype not in _SUFFIX or t == 0 or t > MAX_TOKENS or k % per or w.group_size % per
            or (bias is not None and bias.dtype != x.dtype)):
        # prefill (and anything the kernel does not cover): dequantise once, then cuBLAS
        return torch.nn.functional.linear(x, dequantize(w, x.dtype), bias)
    x2 = x2.contiguous()
    if x2.data_ptr() % 16:  # the kernel reads activations in 16-byte vectors
        x2 = x2.clone()
    s, o = gpu_params(w)
    y = torch.empty(t, n, dtype=x.dtype, device=x.device)  # [T, N]
    nt = _width(t)
    _module(x.device)[f"qgemv_{_SUFFIX[x.dtype]}_b{w.bits}_t{nt}"](
        ((n + WARPS - 1) // WARPS, (t + nt - 1) // nt), (WARPS * 32,), w.qweight, s, o, x2, bias, y, n, k,
        w.group_size, t)
    return y.view(*x.shape[:-1], n)
