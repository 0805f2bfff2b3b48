"""The op registry: which implementation serves each op on this device.

Layers never call kernels directly: they call ``opset.<op>(...)`` on an :class:`OpSet` resolved
once, at model build, for (backend, device, dtype). For each op the registry takes the
highest-priority implementation of the chosen backend whose ``supports`` accepts the device and
dtype, and falls back to the reference implementation otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class DeviceSpec:
    """What an implementation may ask of the device it would run on."""

    type: str  # "cpu" | "cuda"
    capability: tuple[int, int] | None  # (9, 0) for an H200; None on the CPU
    dtype: torch.dtype
    index: int = 0

    @classmethod
    def of(cls, device: torch.device | str, dtype: torch.dtype) -> "DeviceSpec":
        device = torch.device(device)
        if device.type == "cuda":
            idx = device.index if device.index is not None else torch.cuda.current_device()
            return cls("cuda", torch.cuda.get_device_capability(idx), dtype, idx)
        return cls(device.type, None, dtype, 0)


@dataclass(frozen=True)
class OpImpl:
    """One implementation of one op, as a backend registers it."""

    op: str
    backend: str
    fn: Callable
    name: str = ""  # e.g. "gemv_bf16_sm90"; shown by `ninfer backends --explain`
    priority: int = 0
    supports: Callable[[DeviceSpec], bool] | None = None
    weight_layout: str = "dense"  # GEMM only
    kv_format: str = "bf16"  # attention only ("bf16" means the model dtype)
    phases: tuple[str, ...] = ("prefill", "decode", "verify")  # attention only

    def accepts(self, spec: DeviceSpec) -> bool:
        try:
            return self.supports is None or bool(self.supports(spec))
        except Exception:
            return False


@dataclass
class OpSet:
    """The resolved implementation of every op for one (backend, device, dtype)."""

    backend: str
    spec: DeviceSpec
    impls: dict[str, OpImpl] = field(default_factory=dict)
    gemm: dict[str, OpImpl] = field(default_factory=dict)  # weight layout -> its linear

    def linear_for(self, layout: str) -> Callable:
        """The GEMM for weights stored in ``layout`` ("dense", "int4_grouped", ...)."""
        if layout in self.gemm:
            return self.gemm[layout].fn
        from ..errors import NinferError

        raise NinferError(f"No GEMM is registered for weight layout {layout!r}; install a backend that has one "
                          "or load the model unquantised.")

    def __getattr__(self, op: str) -> Callable:
        impls = self.__dict__.get("impls", {})
        if op in impls:
            return impls[op].fn
        raise AttributeError(f"op {op!r} has no implementation (not even the reference)")

    def explain(self) -> dict[str, str]:
        return {op: f"{i.backend}:{i.name or getattr(i.fn, '__name__', op)}" for op, i in sorted(self.impls.items())}


def all_impls() -> list[OpImpl]:
    from ..plugins import collect

    impls = []
    for hook in ("ninfer_register_ops", "ninfer_register_gemm", "ninfer_register_attention"):
        impls.extend(collect(hook))
    return impls


def resolve(backend: str, spec: DeviceSpec, kv_format: str = "bf16", weight_layout: str = "dense") -> OpSet:
    """Pick, per op, the best implementation of ``backend`` for ``spec``; reference otherwise."""
    chosen: dict[str, OpImpl] = {}
    gemm: dict[str, OpImpl] = {}
    impls = all_impls()

    def fits(impl: OpImpl) -> bool:  # attention and KV writes serve one KV format; "linear" one layout
        if impl.op in ("paged_attention", "write_kv", "attention_gated") and impl.kv_format != kv_format:
            return False
        return impl.op != "linear" or impl.weight_layout == weight_layout

    for impl in impls:
        if impl.backend != "reference":
            continue
        if impl.op == "linear":
            gemm.setdefault(impl.weight_layout, impl)
        if fits(impl):
            chosen.setdefault(impl.op, impl)
    if backend != "reference":
        best: dict[str, OpImpl] = {}
        best_gemm: dict[str, OpImpl] = {}
        for impl in impls:
            if impl.backend != backend or not impl.accepts(spec):
                continue
            if impl.op == "linear":
                cur = best_gemm.get(impl.weight_layout)
                if cur is None or impl.priority > cur.priority:
                    best_gemm[impl.weight_layout] = impl
            if not fits(impl):
                continue
            if impl.op not in best or impl.priority > best[impl.op].priority:
                best[impl.op] = impl
        chosen.update(best)
        gemm.update(best_gemm)
    return OpSet(backend=backend, spec=spec, impls=chosen, gemm=gemm)
