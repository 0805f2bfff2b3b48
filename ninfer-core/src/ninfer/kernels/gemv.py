"""Launcher of the tensor-core GEMV (``include/ninfer/gemv.cuh``: ``gemv_mma``) for 1..16 tokens, plain or with
the SwiGLU epilogue, shared by ``linear`` (ops.py) and ``linear_silu_mul`` (fused.py).

The split of K over blocks (``k_splits``) depends only on the matrix shape and the GPU's multiprocessor count,
never on the number of tokens, so a T-token call returns, column for column, the bits of T one-token calls
(batch invariance: a speculative verify forward computes exactly what decoding would have).

``MODE`` (``NINFER_GEMV``, read at import; benchmarks assign it) picks what serves 1..16 tokens:

- ``auto`` (default): 1 token the CUDA-core GEMV (``gemv_*_t1``, split-K), 2..16 tokens cuBLAS: the fastest
  per width on the H200 (bench/gemv_mma.py, bench/RESULTS.md 2026-12-02). Not batch-invariant: a verify
  forward's logits can differ in the last bits from the decodes it stands for.
- ``mma``: this tensor-core kernel for every width, batch-invariant (bitwise), at a cost measured there:
  it streams the weights at 0.44-0.77 of copy bandwidth against the CUDA-core GEMV's 0.78-1.02.
- ``simt``: the CUDA-core kernels for every width (``gemv_*_t{1,2,4,8,16}``), the previous behaviour.

``NINFER_GEMV_KSG=n`` forces the K split (measurements only: it changes the summation order).
"""

from __future__ import annotations

import os
from functools import lru_cache

import torch

from .library import DTYPE_SUFFIX, KernelLibrary

MODE = os.environ.get("NINFER_GEMV", "auto")
MMA_MAX_TOKENS = 16
MAX_KSG = 8


def mma_on() -> bool:
    """Tensor-core GEMV for 1..16 tokens (batch-invariant)."""
    return MODE == "mma"


def cublas_for(ntok: int) -> bool:
    """cuBLAS for this many tokens (2..16 under ``auto``; prefill above 16 always)."""
    return MODE == "auto" and ntok >= 2


@lru_cache(maxsize=None)
def sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def k_splits(N: int, K: int, sms: int, warps: int = 4) -> int:
    """Blocks sharing one 16-row tile along K. Small matrices split so that every multiprocessor streams to
    the end (about 4 blocks' worth per SM), while each warp keeps at least 8 chunks of 32 k to pipeline.
    A function of (N, K, sms) only: every token count sums in the same order."""
    forced = os.environ.get("NINFER_GEMV_KSG")
    if forced:
        return max(1, min(MAX_KSG, int(forced)))
    tiles, chunks = (N + 15) // 16, (K + 31) // 32
    ksg = 1
    while ksg < MAX_KSG and tiles * ksg < 4 * sms and chunks // (2 * ksg * warps) >= 8:
        ksg *= 2
    return ksg


class MmaGemv:
    """``gemv(x [T, K], W [N, K], bias, silu)`` for one backend's library; the caller checked dtype, K % 8,
    contiguity and 16-byte alignment, and 1 <= T <= 16."""

    def __init__(self, lib: KernelLibrary, prefix: str = "gemv_mma_", **tuning: int):
        """``prefix``/``tuning`` (NINFER_MMA_* values): a benchmark's variant kernels in its own library."""
        self.lib, self.prefix = lib, prefix

        def tune(name: str, default: int) -> int:
            return tuning.get(name, lib.tuning(f"NINFER_MMA_{name}", default))

        self.warps = tune("WARPS", 4)
        self.mt = {False: tune("MT", 1), True: tune("MT_SILU", 2)}
        self.stages = {8: tune("U8", 8), 16: tune("U16", 4)}
        self.registers_only = lib.tuning("NINFER_MMA_K8", 0) == 1  # Turing: no cp.async ring in shared memory
        self.counters: dict[int, torch.Tensor] = {}  # device -> int32 per row block, zero between launches

    def _counters(self, device: torch.device, n: int) -> torch.Tensor | None:
        c = self.counters.get(device.index)
        if c is None or c.numel() < n:
            if torch.cuda.is_current_stream_capturing():
                return None  # allocated on an eager call; a graph must not own it (a reduce launch finishes)
            c = self.counters[device.index] = torch.zeros(max(n, 1 << 16), dtype=torch.int32, device=device)
        return c

    def smem(self, device: torch.device, silu: bool, nc: int) -> int:
        """Dynamic shared memory of a launch: the cp.async ring, [warps][stages][2 MT + n-tiles][32 lanes] x 16 B."""
        if self.registers_only or _capability(device.index)[0] < 8:
            return 0
        return self.warps * self.stages[nc] * (2 * self.mt[silu] + nc // 8) * 512

    def __call__(self, x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 silu: bool = False) -> torch.Tensor:
        T, K = x2.shape
        N = weight.shape[0]
        dev = x2.device
        s = DTYPE_SUFFIX[x2.dtype]
        nc = 8 if T <= 8 else 16
        out_rows = N // 2 if silu else N
        rows = 16 * (self.mt[silu] // 2 if silu else self.mt[silu])  # output rows per block
        mblocks = (out_rows + rows - 1) // rows
        ksg = k_splits(N, K, sm_count(dev.index), self.warps)
        y = torch.empty(T, out_rows, dtype=x2.dtype, device=dev)  # [T, N] or [T, I]
        part = torch.empty(ksg * T * N, dtype=torch.float32, device=dev) if ksg > 1 else None  # [ksg, T, N]
        ctr = self._counters(dev, mblocks) if ksg > 1 else None
        mod = self.lib.module(dev)
        kern = mod[f"{self.prefix}{'silu_' if silu else ''}{s}_n{nc}"]
        smem = self.smem(dev, silu, nc)
        if smem:  # static shared memory counts towards the 48 KB default too
            kern.set_max_dynamic_smem(smem)
        kern((mblocks, ksg), (self.warps * 32,), weight, x2, bias, y, part, ctr, N, K, T, ksg, smem=smem)
        if ksg > 1 and ctr is None:
            mod[f"{self.prefix}{'silu_' if silu else ''}reduce_{s}"](((out_rows * T + 255) // 256,), (256,), part, bias,
                                                                y, N, T, ksg)
        return y


def form(N: int, K: int, pairs: bool) -> tuple[int, int]:
    """(rows a warp, warps a row) of the one-token CUDA-core GEMV for a [N, K] weight (``linear``; ``gdn_in_proj``
    chooses alike, so its projection has the same bits: the bits depend on the split only).

    ``pairs``: the backend's tuning ``NINFER_GEMV_PAIRS`` (``NINFER_GEMV_PAIRS=0|1`` in the environment overrides
    it, read at each launch, for A/B). With it, matrices of up to 16 640 rows take two rows a warp with the next
    round of loads in flight (``gemv_*_t1_r2_k*``), split in 2, or unsplit where K >= 6144 with at least 5120 rows:
    on the H200 faster than one row a warp on every such decode shape of Llama-3-8B and Qwen3.5-27B, an RMSNorm
    kernel between GEMVs as in a decoder layer (bench/gemv_lab.py --gap; bench/RESULTS.md 2026-12-03 session 7).
    Not the best of that sweep on every shape: single structures read 0.01-0.06 more on some (e.g. 27B out / attn o,
    one row a warp with 8 loads), left out to keep two entry points.
    Longer matrices (gate_up, lm_head) and backends without the tuning keep one row a warp (``split_k``)."""
    env = os.environ.get("NINFER_GEMV_PAIRS", "")
    min_k = 0
    if env in ("0", "1"):
        pairs = env == "1"
    elif env.startswith("k") and env[1:].isdigit():  # k5120: pairs only where K >= 5120 (A/B of the rule)
        pairs, min_k = True, int(env[1:])
    if pairs and N <= 16384 + 256 and K >= min_k:
        return 2, 1 if (K >= 6144 and N >= 5120) else 2
    return 1, split_k(N, K)


def split_k(N: int, K: int) -> int:
    """Warps per row of the one-token CUDA-core GEMV (``linear``; ``gdn_in_proj``'s GEMV splits alike, so its
    projection has the same bits): short matrices split K so that enough loads are in flight.
    ``NINFER_GEMV_SPLITK=0`` turns it off, ``=2`` / ``=4`` forces that split (A/B measurements).
    The rule is the fastest split per shape measured on the H200 (bench/fused_ops.py, bench/RESULTS.md)."""
    forced = os.environ.get("NINFER_GEMV_SPLITK", "1")
    if forced in ("0", "2", "4"):
        return max(1, int(forced))
    if N > 16384 + 256:  # gate_up, lm_head: enough rows to stream unsplit (not measured split); 16384 + 2 x 48:
        return 1          # the 27B's Gated DeltaNet in_proj with its b|a rows (gdn_in_proj), measured as 16384
    if K <= 5120 or N <= 4096:  # 1024..16384 x 4096/5120 and 4096 x 14336: 4 fastest
        return 4
    # 5120 x 6144: 2 (0.834 of copy bw against 0.782 split 4); 5120 x 17408: 4 (0.882 against 0.847 unsplit,
    # bench/gemv_split.py, bench/RESULTS.md 2026-12-03; an earlier sweep had found 1 best there)
    return 2 if K <= 8192 else 4
