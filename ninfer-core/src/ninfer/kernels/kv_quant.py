"""Launchers for the quantised KV cache kernels (``include/ninfer/kv_quant.cuh``), registered by every GPU
backend for the KV formats int8, int4 and int4_norot (``ninfer.quant.kv_cache``).

- ``write_kv``: one launch quantises K and V of T tokens (K centring, block Hadamard rotation, codes and
  fp16 scales / offsets). The first write of a pool fixes K's centre (the chunk's mean key) with one torch
  reduction before the launch, as the reference does; every later write is the kernel alone.
- ``paged_attention``: decode / verify (T <= 16 query tokens): flash-decoding over the codes, dequantised in
  registers, the query rotated instead of K, a rotated V's partial outputs rotated back, then the bf16
  path's combine kernel. Prefill (T > 16) on sm_80+: ``kvq_prefill``, a flash attention (mma.sync) that
  dequantises each tile of codes into shared memory, no dense copy of the context. Below sm_80, for blocks of
  other than a power of two tokens, and under NINFER_KVQ_PREFILL=gather: the dense pass, the used blocks
  dequantised (one ``kvq_gather`` launch for K and one for V, into the query's dtype), then torch SDPA.

Anything the kernels were not written for (CPU tensors, head_dim outside 64/128/256, a group other than 64,
non-contiguous pools, a dtype the backend lacks) runs the reference op of ``ninfer.quant.kv_ops``. Nothing
syncs with the host on the decode/verify path, so CUDA graphs capture it.
"""

from __future__ import annotations

import os

import torch

from ..ops import OpImpl
from ..quant import kv_ops
from ..quant.kv_cache import QuantKVPool, hadamard_block, rotate
from .attention import COMBINE_THREADS, DECODE_MAX_TOKENS, MAX_SPLITS, prefill_sdpa, split_size
from .gdn import smem_optin, tensor_cores
from .library import ATTN_HEAD_DIMS, DTYPE_SUFFIX, KernelLibrary
from .ops import serves

KVQ_FORMATS = ("int8", "int4", "int4_norot")
# Keys per split of the decode kernel (a power of two, 32..256); 0: the bf16 path's split_size(capacity).
# NINFER_KVQ_SPLIT=N for A/B measurements (bench/kv_attention.py --splits sets it per row).
SPLIT_KEYS = int(os.environ.get("NINFER_KVQ_SPLIT", "0"))
GROUP = 64  # KVQ_GROUP in kv_quant.cuh
WRITE_WARPS = 4  # vectors (token, head of K or V) per block of the write


# Prefill (T > 16) over a quantised cache, NINFER_KVQ_PREFILL:
#   "fused" (default): kvq_prefill wherever it runs (sm_75+, 16-bit queries, blocks of a power of two tokens):
#     nothing allocated beyond its output however long the context. On the H200 (bench/RESULTS.md, 2026-12-04
#     session 13, call 7) it takes 0.80-1.08x the dense pass's time at 8K and 1.21-1.22x at 32K, where the dense pass
#     copies ~290 MB a layer call;
#   "gather": the dense pass (kvq_gather, then torch's flash SDPA).
# kvq_prefill's warps a block (16 query rows each): the most whose shared memory fits, of 16 / 8 (head_dim 64 and 128)
# and 8 / 4 (256); NINFER_KVQ_PREFILL_WARPS=N picks one of those (A/B). Turing's form (the sm75 backend's build,
# NINFER_MMA_K8) takes tiles of 32 keys (16 at head_dim 256): within its 64 KB a block, 16 / 8 warps fit at head_dim 64,
# 8 at 128 and 4 at 256.
PREFILL_MODE = os.environ.get("NINFER_KVQ_PREFILL", "fused")
PREFILL_WARPS = int(os.environ.get("NINFER_KVQ_PREFILL_WARPS", "0"))
LOG2E = 1.4426950408889634


def prefill_warps(D: int) -> tuple[int, int]:
    """kvq_prefill's forms at head_dim D, by warps a block, the larger first (kvq_prefill.cuh)."""
    return (8, 4) if D == 256 else (16, 8)


def prefill_tile(D: int, warps: int, turing: bool = False) -> int:
    """Keys a tile of kvq_prefill (KvqPrefillShape::BN in kvq_prefill.cuh)."""
    if turing:
        return 16 if D == 256 else 32
    return 32 if D == 256 and warps == 4 else 64


def prefill_smem(D: int, bits: int, warps: int, turing: bool = False) -> int:
    """Dynamic shared memory of kvq_prefill at head_dim D (KvqPrefillShape and KvqStage in kvq_prefill.cuh): the
    query rows and one tile of K and of V in fp16, rows padded by 8 elements; the next tile's codes, scales and
    offsets as the pool holds them, and a parity per key. ``turing``: the form the sm75 backend builds."""
    bn = prefill_tile(D, warps, turing)
    sw = 1 if D == 64 else D // 128
    return (16 * warps + 2 * bn) * (D + 8) * 2 + 2 * bn * D * bits // 8 + 16 * bn * sw + 4 * bn


def quant_split_size(capacity: int) -> int:
    """Keys per split of the quantised decode kernel: the bf16 path's, but at least 128 from 8K of capacity on
    (H200, bench/RESULTS.md: at 8K, 128 keys beat the bf16 path's 64 at both shapes and widths; at 32K its 256
    beat 128)."""
    c = split_size(capacity)
    return max(c, 128) if capacity >= 8192 else c


def _pool_ok(p, bits: int | None = None) -> bool:
    if not isinstance(p, QuantKVPool) or not p.data.is_cuda or p.group != GROUP or p.bits not in (4, 8):
        return False
    if bits is not None and p.bits != bits:
        return False
    if p.head_dim not in ATTN_HEAD_DIMS or p.scale.dtype != torch.float16 or not p.data.is_contiguous():
        return False
    if not p.scale.is_contiguous() or (p.bits == 4 and (p.offset is None or not p.offset.is_contiguous()
                                                       or p.offset.dtype != torch.float16)):
        return False
    return p.center is None or (p.center.dtype == torch.float32 and p.center.is_contiguous())


def _rows_ok(x: torch.Tensor, D: int) -> bool:
    return x.dim() == 3 and x.shape[-1] == D and x.stride(2) == 1 and x.stride(1) == D


def _aligned(*pools: QuantKVPool) -> bool:  # 16-byte code loads
    return all(p.data.data_ptr() % 16 == 0 for p in pools)


def make_kv_quant_ops(lib: KernelLibrary) -> dict:
    """``write_kv`` and ``paged_attention`` over :class:`QuantKVPool` caches for one backend's library."""
    warps = lib.tuning("NINFER_ATTN_WARPS", 4)
    turing_build = bool(lib.tuning("NINFER_MMA_K8", 0))  # kvq_prefill's Turing form, whatever the device

    def suffix(t: torch.Tensor):
        return DTYPE_SUFFIX.get(t.dtype) if t.is_cuda and t.dtype in lib.dtypes else None

    def write_kv(k, v, k_cache, v_cache, slots):
        s = suffix(k)
        T = k.shape[0]
        D = getattr(k_cache, "head_dim", -1)
        if (s is None or v.dtype != k.dtype or T == 0 or not _pool_ok(k_cache) or not _pool_ok(v_cache, k_cache.bits)
                or v_cache.head_dim != D or not _rows_ok(k, D) or not _rows_ok(v, D) or v.shape != k.shape
                or k.shape[1] != k_cache.data.shape[2] or v_cache.center is not None  # the kernel centres K only
                or slots.numel() != T or not _aligned(k_cache, v_cache)):
            return kv_ops.write_kv(k, v, k_cache, v_cache, slots)
        if k_cache.center is not None and not k_cache.centered:  # the first write fixes K's centre
            k_cache.center.copy_(k.float().mean(0))
            k_cache.centered = True
        Hk = k.shape[1]
        blk = hadamard_block(D)
        slots = slots.to(device=k.device, dtype=torch.int64).contiguous()
        lib.module(k.device)[f"kvq_write_{s}_d{D}"](
            (T, (2 * Hk + WRITE_WARPS - 1) // WRITE_WARPS), (WRITE_WARPS * 32,), k, v,
            k_cache.data, k_cache.scale, k_cache.offset, k_cache.center,
            v_cache.data, v_cache.scale, v_cache.offset, slots, Hk, k.stride(0), v.stride(0), k_cache.bits,
            blk if k_cache.rotate else 0, blk if v_cache.rotate else 0)

    def gather(pool, blocks, dtype):
        """The blocks dequantised into [nblk, bs, Hk, D] in dtype: one kvq_gather launch (bit for bit
        kv_ops._gather(...).to(dtype)) where it serves, else those torch ops."""
        bs, hk = pool.data.shape[1:3]
        D = pool.head_dim
        if D % 8 or pool.group % 8 or dtype not in lib.dtypes or not pool.scale.is_contiguous():
            return kv_ops._gather(pool, blocks).to(dtype)
        out = torch.empty(blocks.numel(), bs, hk, D, dtype=dtype, device=pool.data.device)
        total = blocks.numel() * bs * hk * (D // 8)
        lib.module(pool.data.device)[f"kvq_gather_{DTYPE_SUFFIX[dtype]}_b{pool.bits}"](
            ((total + 255) // 256,), (256,), pool.data, pool.scale, pool.offset, blocks, out, blocks.numel(), bs * hk,
            D, pool.group)
        return out

    def fused_prefill(q, k_cache, v_cache, block_table, positions, scale):
        """T > 16 on sm_75+: one kvq_prefill launch, flash attention over the codes (dequantised tile by tile in
        shared memory), no dense copy of the context. None where it does not serve or PREFILL_MODE is "gather"."""
        s = suffix(q)
        T, Hq, D = q.shape
        dev = q.device
        bs, Hk = k_cache.data.shape[1], k_cache.data.shape[2]
        if (PREFILL_MODE == "gather" or s is None or q.element_size() != 2 or bs & (bs - 1)  # pages by shifts
                or torch.cuda.get_device_capability(dev.index) < (7, 5)):
            return None
        turing = turing_build or not tensor_cores(dev.index)
        optin = smem_optin(dev.index)  # 8 warps at head_dim 256 need 168 KB: 4 (84) on sm_86 / sm_89
        forms = [w for w in prefill_warps(D) if prefill_smem(D, k_cache.bits, w, turing) <= optin - 16  # + static
                 and PREFILL_WARPS in (0, w)]
        if not forms:
            return None
        warps = forms[0]
        smem = prefill_smem(D, k_cache.bits, warps, turing)
        qr = rotate(q.float()).to(q.dtype) if k_cache.rotate else q
        if qr.stride(0) % 8 or qr.data_ptr() % 16:
            qr = qr.contiguous()
        bt = (block_table if block_table.dtype == torch.int32 else block_table.to(torch.int32)).contiguous()
        pos = (positions if positions.dtype == torch.int64 else positions.to(torch.int64)).contiguous()
        out = torch.empty(T, Hq, D, dtype=q.dtype, device=dev)
        fn = lib.module(dev)[f"kvq_prefill_{s}_d{D}_b{k_cache.bits}_w{warps}"]
        fn.set_max_dynamic_smem(smem)
        rows, per_block = T * (Hq // Hk), 16 * warps
        fn(((rows + per_block - 1) // per_block, Hk), (32 * warps,), qr, k_cache.data, k_cache.scale,
           k_cache.offset, v_cache.data, v_cache.scale, v_cache.offset, bt, pos, out, T, Hq, Hk, bs.bit_length() - 1,
           qr.stride(0), float(scale) * LOG2E, smem=smem)
        return rotate(out.float()).to(q.dtype) if v_cache.rotate else out

    def prefill(q, k_cache, v_cache, block_table, positions, scale):
        """T > 16: the fused kernel where it serves (sm_80+, 16-bit queries) and PREFILL_MODE picks it; else the
        used blocks dequantised in the query's dtype by one launch each (kvq_gather), then torch SDPA (as the bf16
        path)."""
        o = fused_prefill(q, k_cache, v_cache, block_table, positions, scale)
        if o is not None:
            return o
        bs = k_cache.data.shape[1]
        nblk = (int(positions[-1].item()) + bs) // bs
        blocks = block_table[:nblk].long().contiguous()
        k = gather(k_cache, blocks, q.dtype)  # [nblk, bs, Hk, D], rotated if the pool rotates
        v = gather(v_cache, blocks, q.dtype)
        qr = rotate(q.float()).to(q.dtype) if k_cache.rotate else q
        o = prefill_sdpa(qr, k, v, None, positions, scale)  # k, v: the context's blocks in order, read in place
        return rotate(o.float()).to(q.dtype) if v_cache.rotate else o

    def paged_attention(q, k_cache, v_cache, block_table, positions, scale):
        s = suffix(q)
        T, Hq, D = q.shape
        if (s is None or not _pool_ok(k_cache) or not _pool_ok(v_cache, k_cache.bits) or k_cache.head_dim != D
                or v_cache.head_dim != D or not _rows_ok(q, D) or Hq % k_cache.data.shape[2] or T == 0
                or not _aligned(k_cache, v_cache)):
            return kv_ops.paged_attention(q, k_cache, v_cache, block_table, positions, scale)
        if T > DECODE_MAX_TOKENS:
            return prefill(q, k_cache, v_cache, block_table, positions, scale)
        bs, Hk = k_cache.data.shape[1], k_cache.data.shape[2]
        bt = block_table if block_table.dtype == torch.int32 else block_table.to(torch.int32)
        bt = bt.contiguous()
        pos = (positions if positions.dtype == torch.int64 else positions.to(torch.int64)).contiguous()
        C = SPLIT_KEYS if SPLIT_KEYS in (32, 64, 128, 256) else quant_split_size(bt.shape[0] * bs)
        S = (bt.shape[0] * bs + C - 1) // C
        if S > MAX_SPLITS:
            return kv_ops.paged_attention(q, k_cache, v_cache, block_table, positions, scale)
        rows = T * (Hq // Hk)
        R = 4 if rows <= 4 else 8
        part_o = torch.empty(T, Hq, S, D, dtype=torch.float32, device=q.device)  # [T, Hq, S, D]
        part_ml = torch.empty(T, Hq, S, 2, dtype=torch.float32, device=q.device)  # [T, Hq, S, (max, sum)]
        out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)  # [T, Hq, D]
        blk = hadamard_block(D)
        mod = lib.module(q.device)
        mod[f"kvq_attention_{s}_d{D}_b{k_cache.bits}_r{R}"](
            ((rows + R - 1) // R, Hk, S), (warps * 32,), q, k_cache.data, k_cache.scale, k_cache.offset,
            v_cache.data, v_cache.scale, v_cache.offset, bt, pos, part_o, part_ml, T, Hq, Hk, bs, S, C,
            q.stride(0), float(scale), blk if k_cache.rotate else 0, blk if v_cache.rotate else 0)
        # the quantised split kernel keeps C keys a split at any context: the combine must not shrink it (cmin = C)
        mod[f"attention_combine_{s}"]((T * Hq,), (COMBINE_THREADS,), part_o, part_ml, pos, out, Hq, S, C, C, D)
        return out

    paged_attention.gather = gather  # prefill's dequantisation (tests)
    return {"write_kv": write_kv, "paged_attention": paged_attention}


def kv_quant_impls(backend: str, lib: KernelLibrary, supports) -> list[OpImpl]:
    """The backend's write_kv and paged_attention for every quantised KV format."""
    fns = make_kv_quant_ops(lib)
    ok = serves(lib, supports)

    names = {"write_kv": f"{backend}.kvq_write (quantise + rotate + centre, K and V in one launch)",
             "paged_attention": f"{backend}.kvq_attention (T<=16, dequant in registers) + kvq_prefill (T>16, sm_80+)"}
    return [OpImpl(op=op, backend=backend, fn=fns[op], name=f"{names[op]} [{fmt}]", priority=10, supports=ok,
                   kv_format=fmt) for fmt in KVQ_FORMATS for op in ("write_kv", "paged_attention")]
