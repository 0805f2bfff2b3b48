"""Act-order (``g_idx``) weights: permute input columns so each group is contiguous again.

GPTQ with ``desc_act`` quantises columns in order of decreasing Hessian diagonal, so column k
belongs to group ``g_idx[k]`` and groups are scattered. Sorting columns by group restores the
grouped layout; the GEMM then reads the activations through the same permutation.
"""

from __future__ import annotations

import torch

from ..errors import NinferError
from .layout import QuantWeight, pack_codes, unpack_codes


def grouped_by_g_idx(q: QuantWeight, g_idx: torch.Tensor) -> QuantWeight:
    """``q`` has its codes in checkpoint column order and scales indexed by group; returns the
    weight with columns sorted by group (``perm`` set), or unchanged when g_idx is trivial."""
    k, g = q.in_features, q.group_size
    g_idx = g_idx.to(torch.int64).flatten()
    if g_idx.numel() != k:
        raise NinferError(f"g_idx has {g_idx.numel()} entries for a weight with {k} inputs; the checkpoint is damaged.")
    if torch.equal(g_idx, torch.arange(k) // g):
        return q
    perm = torch.argsort(g_idx, stable=True)  # [K]
    if not torch.equal(g_idx[perm], torch.arange(k) // g):
        raise NinferError("The checkpoint's g_idx does not give every group exactly group_size columns; "
                          "ninfer cannot repack it (re-quantise without act-order).")
    codes = unpack_codes(q.qweight, q.bits)[:, :k]  # [N, K]
    return QuantWeight(pack_codes(codes[:, perm], q.bits), q.scales, q.bits, g, k, zeros=q.zeros, mins=q.mins,
                       perm=perm)
