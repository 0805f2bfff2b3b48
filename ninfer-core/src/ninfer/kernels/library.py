"""A backend's kernel library: its ``kernels.cu``, the dtypes it instantiates, compiled per arch.

The backend's source sets its tuning macros and includes ``ninfer/kernels.cuh`` (shared by all
backends, in this package's ``include/``), which defines the entry points named here.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .nvrtc import compile_cubin, parse_arch

DTYPE_SUFFIX = {torch.bfloat16: "bf16", torch.float16: "f16"}
GEMV_WIDTHS = (1, 2, 4, 8, 16)  # tokens per pass over the weights
GEMV_SPLITS = (2, 4)  # warps sharing one row in the split-K decode GEMV
GEMV_PAIR_SPLITS = (1, 2)  # the same for the GEMV with two rows a warp (gemv.cuh: gemv_rows)
GEMV_MMA_KERNELS = ("gemv_mma_{s}_n8", "gemv_mma_{s}_n16", "gemv_mma_silu_{s}_n8", "gemv_mma_silu_{s}_n16",
                    "gemv_mma_reduce_{s}", "gemv_mma_silu_reduce_{s}")  # gemv.cuh: tensor-core GEMV, per dtype
ATTN_HEAD_DIMS = (64, 128, 256)
ATTN_CLUSTER_FORMS = ("cluster16w4", "cluster8w8", "cluster16w8")  # kernels.cuh: blocks a cluster, warps a block
KVQ_KERNELS = tuple([f"kvq_write_{{s}}_d{d}" for d in ATTN_HEAD_DIMS]  # kv_quant.cuh, per dtype
                    + [f"kvq_attention_{{s}}_d{d}_b{b}_r{r}" for d in ATTN_HEAD_DIMS for b in (8, 4) for r in (4, 8)]
                    + [f"kvq_gather_{{s}}_b{b}" for b in (8, 4)]
                    + [f"kvq_prefill_{{s}}_d{d}_b{b}_w{w}"  # kvq_prefill.cuh
                       for d in ATTN_HEAD_DIMS for b in (8, 4) for w in ((8, 4) if d == 256 else (16, 8))])
FUSED_KERNELS = ("add_rms_norm", "add_rms_norm_zc", "rope_write_kv", "gemv_silu_t1", "gemv_silu2_t1")  # fused.cuh, per dtype
GDN_CHUNK_BVS = (16, 32)  # value columns per block of the chunked prefill's state pass
GDN_KERNELS = ("causal_conv1d_update_{s}_k4", "gdn_recurrent_{s}_d128",  # gdn_kernels.cuh, per dtype and f32
               "gdn_recurrent_gated_{s}_d128",
               "causal_conv1d_prefill_{s}_k4", "gdn_chunk_prep_{s}_d128",
               *(f"gdn_chunk_state_{{s}}_d128_v{bv}" for bv in GDN_CHUNK_BVS))


def _family_names(suffix: str) -> list[str]:
    names = [f"gemv_{suffix}_t{n}" for n in GEMV_WIDTHS] + [f"gemv_{suffix}_t1_k{k}" for k in GEMV_SPLITS]
    names += [f"gemv_gdn_in_{suffix}_t1"] + [f"gemv_gdn_in_{suffix}_t1_k{k}" for k in GEMV_SPLITS]
    names += [f"gemv_{p}{suffix}_t1_r2_k{k}" for p in ("", "gdn_in_") for k in GEMV_PAIR_SPLITS]
    names += [n.format(s=suffix) for n in GEMV_MMA_KERNELS]
    names += [f"{op}_{suffix}" for op in ("rms_norm", "rms_norm_zc", "rms_norm_gated", "rope", "silu_mul",
                                          "write_kv", "argmax", "argmax_part", "attention_combine",
                                          "attention_combine_gate", "gdn_gates", "sigmoid_mul")]
    names += [f"attention_split{c}_{suffix}_d{d}" for d in ATTN_HEAD_DIMS for c in ("", "1", "_combine")]
    names += [f"attention_{c}_{suffix}_d{d}" for d in ATTN_HEAD_DIMS for c in ATTN_CLUSTER_FORMS]
    names += [f"{op}_{suffix}" for op in FUSED_KERNELS]
    names += [n.format(s=suffix) for n in KVQ_KERNELS]
    names += [n.format(s=suffix) for n in GDN_KERNELS]
    names.append(f"gdn_chunk_state_mma_{suffix}_d128")  # gdn_chunked_mma.cuh: 16-bit dtypes only
    return names


@dataclass
class KernelLibrary:
    name: str  # the backend, e.g. "sm90"
    source_path: Path
    dtypes: tuple[torch.dtype, ...]
    arches: tuple[str, ...]  # archs it claims, e.g. ("sm_90",)
    options: tuple[str, ...] = ()
    # every entry point calls ninfer::pdl_wait/pdl_enter before touching anything but constants (the kernels of
    # include/ninfer all do; a test checks it in the PTX): launched with PDL on sm_90+ (ninfer.kernels.launch)
    pdl_aware: bool = True
    _modules: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def source(self) -> str:
        return self.source_path.read_text()

    def set_options(self, options: tuple[str, ...]) -> None:
        """Compile with ``options`` from now on (benchmarks' A/B builds): modules already loaded are dropped, so the
        launchers, which hold this library, load the variant at their next call."""
        options = tuple(options)
        with self._lock:
            if options != self.options:
                self.options = options
                self._modules.clear()

    def tuning(self, macro: str, default: int) -> int:
        """A tuning constant the backend's source #defines (the launch shape must agree with it)."""
        m = re.search(rf"^#define {macro} (\d+)", self.source(), re.M)
        return int(m.group(1)) if m else default

    def kernel_names(self) -> list[str]:
        names = ["argmax_f32", "argmax_part_f32", "argmax_reduce", *(n.format(s="f32") for n in GDN_KERNELS)]
        for dt in self.dtypes:
            names += _family_names(DTYPE_SUFFIX[dt])
        return names

    def compile(self, arch: str, use_cache: bool = True, progress: bool = True) -> tuple[bytes, bool]:
        """Compile for ``arch`` ('sm_86'); returns (cubin, was_cached). Needs no GPU."""
        parse_arch(arch)
        return compile_cubin(self.source(), f"ninfer_{self.name}", arch, self.options,
                             include_dirs=(str(self.source_path.parent),), use_cache=use_cache, progress=progress)

    def missing_kernels(self, cubin: bytes) -> list[str]:
        """Entry points absent from a cubin (their names sit in its ELF string table)."""
        return [n for n in self.kernel_names() if n.encode() + b"\0" not in cubin]

    def module(self, device: torch.device | int | None = None):
        """The loaded module for a CUDA device, compiled for that device's own arch (cached)."""
        from .launch import Module

        idx = torch.device("cuda", device).index if isinstance(device, int) else (
            device.index if device is not None and device.index is not None else torch.cuda.current_device())
        mod = self._modules.get(idx)
        if mod is None:
            with self._lock:
                mod = self._modules.get(idx)
                if mod is None:
                    major, minor = torch.cuda.get_device_capability(idx)
                    arch = f"sm_{major}{minor}"
                    cubin, _ = self.compile(arch)
                    mod = self._modules[idx] = Module(cubin, idx, label=f"ninfer-{self.name}",
                                                      pdl_arch=arch if self.pdl_aware else None)
        return mod
