"""Paged attention launcher: flash-decoding kernels for decode/verify (T <= 16), torch SDPA for prefill.

Decode and verify never read the context length on the host: the split count comes from the block
table's length (its capacity), splits past a row's position exit at once, so one CUDA graph serves
every length up to that capacity. A block of up to 4 query rows (decode of a GQA group of <= 4 q heads) reads its
split's K and V rows together in one pass; larger blocks score the whole split first, then read V
(``attention.cuh``). Prefill (not graph-captured) gathers the used blocks and calls
``torch.nn.functional.scaled_dot_product_attention``: reading the chunk's first and last position is its
one host sync per forward; a later chunk of a prompt uses the bottom-right causal mask, each KV head read for its
query heads (``enable_gqa``; on the H200 7-15 % faster than repeating K and V first, bench/RESULTS.md session 12)
(``NINFER_PREFILL_ATTN=mask``: an explicit boolean mask, as before).
"""

from __future__ import annotations

import os
import weakref

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from ..errors import NinferError
from ..quant.fixed import attach
from ..reference import ops as ref
from .fused import fusion_enabled
from .library import ATTN_CLUSTER_FORMS, ATTN_HEAD_DIMS, DTYPE_SUFFIX, KernelLibrary
from .nvrtc import parse_arch

DECODE_MAX_TOKENS = 16
ROWS_PER_BLOCK = 8  # NINFER_ATTN_ROWS in kernels.cuh: the most query rows one block of the split kernel takes
PASS_ROWS = 4  # NINFER_ATTN_PASS_ROWS in attention.cuh: a block of at most this many rows runs the one-pass form
MAX_SPLIT = 256  # NINFER_ATTN_CMAX
MAX_SPLITS = 1024  # ATTN_MAX_SPLITS in attention.cuh
COMBINE_THREADS = 256  # COMBINE_THREADS in attention.cuh


MIN_SPLIT = 32  # the fewest keys per split: the kernels shrink the capacity's splits to the context, down to this
# Launches whose blocks all run the one-pass form (decode of GQA groups of <= PASS_ROWS q heads) spread a context
# over at most this many splits while they can (longer splits, fewer blocks and a shorter combine); 0: no limit.
ONE_PASS_MAX_SPLITS = 64
BLOCK_ROWS = ROWS_PER_BLOCK  # query rows per block the launcher asks for (<= ROWS_PER_BLOCK)
# ... and for one token whose GQA group is too large for the one-pass form in one block (> PASS_ROWS q heads a kv
# head): blocks of this many rows, which run the one-pass form (it requests its first K/V rows before its PDL wait)
# where the group ran the two-pass form in one block; each block reads the split's K/V (the later ones from L2). On an
# H100 the 27B W4A16 decode (a group of 6) 0 to +2.6 % with 2 rows (six pairs in three calls), +1.2-1.3 % with 3, level
# with 1; a group that fits one block stays in one (the 8B's 4 in 2 blocks of 2: -0.5 to -1.1 %). bench/RESULTS.md,
# session 29.
DECODE_BLOCK_ROWS = 2


# Decode of one token whose GQA groups fit the one-pass form, on sm_90+: one launch, a cluster of blocks per kv head
# merging through shared memory (attention.cuh: attention_cluster), instead of split + combine. NINFER_ATTN_CLUSTER:
# the form (library.ATTN_CLUSTER_FORMS, e.g. "cluster16w4"), "0" for split + combine.
CLUSTER_DEFAULT = "0"
CLUSTER_MIN_ARCH = 90


def cluster_form() -> str | None:
    v = os.environ.get("NINFER_ATTN_CLUSTER", CLUSTER_DEFAULT).strip()
    if v in ("", "0", "off"):
        return None
    if v not in ATTN_CLUSTER_FORMS:
        raise NinferError(f"NINFER_ATTN_CLUSTER={v!r} is not a cluster form; use one of "
                          f"{', '.join(ATTN_CLUSTER_FORMS)} or 0.")
    return v


def _cluster_shape(form: str) -> tuple[int, int]:
    """'cluster16w4' -> (16 blocks a cluster, 4 warps a block)."""
    nc, nw = form[len("cluster"):].split("w")
    return int(nc), int(nw)


def split_size(capacity: int) -> int:
    """Keys per split over the block table's capacity: about 128 splits, a power of two in [32, 256]. The grid has
    that many splits; at a shorter context the kernels use shorter ones (attention.cuh: launch_split)."""
    c = MIN_SPLIT
    while c < MAX_SPLIT and c * 128 < capacity:
        c *= 2
    return c


_last_span: list = [None]  # (weakref to a positions tensor, its first and last position)


def _span(positions) -> tuple[int, int]:
    """First and last position of a prefill chunk: read from the device once per forward (the layers of one
    forward pass the same positions tensor), not once per attention layer."""
    c = _last_span[0]
    if c is not None and c[0]() is positions:
        return c[1], c[2]
    first, last = positions[[0, -1]].tolist()  # prefill may sync: it is never graph-captured
    _last_span[0] = (weakref.ref(positions), first, last)
    return first, last


def _flash_gqa(qh, k, v) -> bool:
    """Whether torch's flash SDPA kernel serves these [H, L, D] heads with enable_gqa (what CausalBias tries first)."""
    from torch.backends.cuda import SDPAParams, can_use_flash_attention

    return bool(can_use_flash_attention(SDPAParams(qh[None], k[None], v[None], None, 0.0, False, True)))


def prefill_sdpa(q, k_cache, v_cache, block_table, positions, scale):
    """Causal attention for a prefill chunk through torch SDPA over the gathered blocks (block_table None: the caches
    already hold the context's blocks in order, read in place: the quantised dense pass's dequantised copy)."""
    T, Hq, D = q.shape
    bs, Hk = k_cache.shape[1], k_cache.shape[2]
    first, last = _span(positions)
    L = last + 1
    if block_table is None:
        k = k_cache.reshape(-1, Hk, D)[:L].transpose(0, 1)  # [Hk, L, D], views
        v = v_cache.reshape(-1, Hk, D)[:L].transpose(0, 1)
    else:
        blocks = block_table[: (L + bs - 1) // bs].long()
        k = k_cache[blocks].reshape(-1, Hk, D)[:L].transpose(0, 1)  # [Hk, L, D]
        v = v_cache[blocks].reshape(-1, Hk, D)[:L].transpose(0, 1)
    qh = q.transpose(0, 1)  # [Hq, T, D]
    if first == 0 and T == L:
        o = F.scaled_dot_product_attention(qh[None], k[None], v[None], is_causal=True, scale=scale,
                                           enable_gqa=True)
    elif T == L - first and os.environ.get("NINFER_PREFILL_ATTN") != "mask":
        # a later chunk of one prompt (positions first..last): the causal mask aligned to the bottom right, which
        # the flash kernels take without a mask tensor, reading each KV head for its query heads (enable_gqa).
        # Where flash cannot serve (sm_75, float32, ...) torch's other kernel for this mask takes no GQA and torch
        # would build the [T, L] mask instead: k, v are repeated to the query heads first there, as before (and under
        # NINFER_PREFILL_GQA=repeat, for measurements)
        if Hq > Hk and (os.environ.get("NINFER_PREFILL_GQA") == "repeat" or not _flash_gqa(qh, k, v)):
            r = Hq // Hk
            o = F.scaled_dot_product_attention(qh[None], k.repeat_interleave(r, dim=0)[None],
                                               v.repeat_interleave(r, dim=0)[None],
                                               attn_mask=causal_lower_right(T, L), scale=scale)
        else:
            o = F.scaled_dot_product_attention(qh[None], k[None], v[None], attn_mask=causal_lower_right(T, L),
                                               scale=scale, enable_gqa=Hq > Hk)
    else:
        mask = torch.arange(L, device=q.device)[None, :] <= positions[:, None]  # [T, L], True = attend
        o = F.scaled_dot_product_attention(qh[None], k[None], v[None], attn_mask=mask, scale=scale,
                                           enable_gqa=True)
    return o[0].transpose(0, 1).contiguous()  # [T, Hq, D]


def make_paged_attention(lib: KernelLibrary, sigmoid_mul=None):
    """paged_attention(q, k_cache, v_cache, block_table, positions, scale, gate=None, fixed=False): with a gate
    (``attention_gated``), decode and verify through split + combine apply it in the combine kernel
    (``attention_combine_gate_*``; for one token with fixed the gated row's fixed-point form attached, as
    ``sigmoid_mul`` attaches it, where D % 128 == 0); every other path composes ``sigmoid_mul`` (the backend's
    launcher)."""
    warps = lib.tuning("NINFER_ATTN_WARPS", 4)
    sigmoid_mul = sigmoid_mul or ref.sigmoid_mul
    # Opt-in (NINFER_FUSED=...,attention_merge): the split kernel's last block per (kv head, row chunk)
    # merges the splits, no combine launch, while they fit its shared weights. Slower on the H200.
    combine_in_split = fusion_enabled("attention_merge")
    counters: dict[int, torch.Tensor] = {}  # device -> int32 split counters, zero between launches

    def split_counters(device, n: int):
        c = counters.get(device.index)
        if c is None or c.numel() < n:
            if torch.cuda.is_current_stream_capturing():
                return None  # allocated on an eager step; a graph must not own it
            c = counters[device.index] = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
        return c

    def gate_fits(gate, q) -> bool:  # what the combine kernel reads: [T, Hq, D], 16-byte rows of 8 along D
        return (gate.shape == q.shape and gate.dtype == q.dtype and gate.stride(2) == 1 and gate.stride(1) % 8 == 0
                and gate.stride(0) % 8 == 0 and gate.data_ptr() % 16 == 0)

    def gated(out, gate, fixed):
        return out if gate is None else sigmoid_mul(out, gate, fixed)

    def paged_attention(q, k_cache, v_cache, block_table, positions, scale, gate=None, fixed=False):
        T, Hq, D = q.shape
        nblocks, bs, Hk, Dk = k_cache.shape
        s = DTYPE_SUFFIX.get(q.dtype) if q.is_cuda and q.dtype in lib.dtypes else None
        if (s is None or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype or D not in ATTN_HEAD_DIMS
                or Dk != D or Hq % Hk or q.stride(2) != 1 or q.stride(1) != D or q.stride(0) % 8
                or not (k_cache.is_contiguous() and v_cache.is_contiguous())):
            return gated(ref.paged_attention(q, k_cache, v_cache, block_table, positions, scale), gate, fixed)
        if T > DECODE_MAX_TOKENS:
            return gated(prefill_sdpa(q, k_cache, v_cache, block_table, positions, scale), gate, fixed)
        bt = block_table if block_table.dtype == torch.int32 else block_table.to(torch.int32)
        bt = bt.contiguous()
        pos = positions if positions.dtype == torch.int64 else positions.to(torch.int64)
        mod = lib.module(q.device)
        form = cluster_form()
        if form and T == 1 and Hq // Hk <= PASS_ROWS and mod.arch and parse_arch(mod.arch) >= CLUSTER_MIN_ARCH:
            nc, nw = _cluster_shape(form)
            out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)
            mod[f"attention_{form}_{s}_d{D}"]((Hk, nc), (nw * 32,), q, k_cache, v_cache, bt, pos.contiguous(), out,
                                              Hq, Hk, bs, q.stride(0), float(scale), cluster=(1, nc, 1))
            return gated(out, gate, fixed)
        C = split_size(bt.shape[0] * bs)
        S = (bt.shape[0] * bs + C - 1) // C
        if S > MAX_SPLITS:  # a block table beyond 256K tokens: more splits than the combine kernel holds
            return gated(ref.paged_attention(q, k_cache, v_cache, block_table, positions, scale), gate, fixed)
        part_o = torch.empty(T, Hq, S, D, dtype=torch.float32, device=q.device)  # [T, Hq, S, D]
        part_ml = torch.empty(T, Hq, S, 2, dtype=torch.float32, device=q.device)  # [T, Hq, S, (max, sum)]
        out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)  # [T, Hq, D]
        rows = T * (Hq // Hk)
        br = DECODE_BLOCK_ROWS if T == 1 and rows > PASS_ROWS else BLOCK_ROWS
        chunks = (rows + br - 1) // br  # the kernels take ceil(rows / chunks) rows a block
        rpb = (rows + chunks - 1) // chunks
        # the split rule (attention.cuh: launch_split): the fewest keys per split, the most splits (one-pass blocks)
        rule = MIN_SPLIT | ((ONE_PASS_MAX_SPLITS << 16) if rpb <= PASS_ROWS else 0)
        ctr = split_counters(q.device, Hk * chunks) if combine_in_split and S <= MAX_SPLIT else None
        if ctr is not None:
            mod[f"attention_split_combine_{s}_d{D}"]((Hk, S, chunks), (warps * 32,), q, k_cache, v_cache, bt,
                                                     pos.contiguous(), part_o, part_ml, T, Hq, Hk, bs, S, C,
                                                     rule, q.stride(0), float(scale), out, ctr)
            return gated(out, gate, fixed)
        form = "1" if rpb <= PASS_ROWS else ""  # the one-pass / two-pass entry point
        mod[f"attention_split{form}_{s}_d{D}"]((Hk, S, chunks), (warps * 32,), q, k_cache, v_cache, bt,
                                                pos.contiguous(), part_o, part_ml, T, Hq, Hk, bs, S, C, rule,
                                                q.stride(0), float(scale))
        if gate is None or not gate_fits(gate, q) or (fixed and T == 1 and D % 128):  # (a form group spans heads)
            mod[f"attention_combine_{s}"]((T * Hq,), (COMBINE_THREADS,), part_o, part_ml, pos, out, Hq, S, C, rule, D)
            return gated(out, gate, fixed)
        xq = xg = None
        if fixed and T == 1 and D % 128 == 0:  # the gated row's form, a warp a group of 128 (fixed_group32)
            xq = torch.empty(2, Hq * D, dtype=torch.int8, device=q.device)
            xg = torch.empty(Hq * D // 128, 2, dtype=torch.int32, device=q.device)
        mod[f"attention_combine_gate_{s}"]((T * Hq,), (COMBINE_THREADS,), part_o, part_ml, pos, out, Hq, S, C, rule,
                                           D, gate, gate.stride(0), gate.stride(1), xq, xg)
        if xq is not None:
            attach(out, xq, xg)
        return out

    return paged_attention
