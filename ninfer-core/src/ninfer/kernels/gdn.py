"""Launchers for the Gated DeltaNet decode/verify kernels (``include/ninfer/gdn_kernels.cuh``).

``causal_conv1d_update``, ``gdn_recurrent``, ``gdn_recurrent_states`` and ``gdn_chunked`` meet the reference ops of
``ninfer.reference.gdn`` exactly: same arguments, same results, fresh outputs, inputs never modified
(a verify forward reads the conv window and state it passed in after the op, in
``kv.recurrent.RecurrentState.commit_verify``). The kernels themselves allow the new state to alias
the old one, should the contract gain an in-place form. Whatever a kernel was not written for (another
head dim or conv width, mixed dtypes, CPU tensors, heads not contiguous) goes to the reference op.
Prefill's ``gdn_chunked`` runs the same token-by-token kernel (one launch, the state in registers
throughout) instead of the reference's chunk-by-chunk torch ops, whose launches dominate at prefill
sizes; a true chunked kernel is future work. ``causal_conv1d_prefill`` stays on the reference.
Nothing here syncs with the host, so CUDA graphs capture it. ``rms_norm_gated`` (the output norm) is served by ``ops.py``.
"""

from __future__ import annotations

import torch

from ..reference import gdn as ref
from ..reference.gdn import L2_EPS
from .library import DTYPE_SUFFIX, KernelLibrary

CONV_K = 4  # conv width the kernels are built for (Qwen3.5: linear_conv_kernel_dim)
HEAD_DIM = 128  # Dk = Dv the gated delta rule kernel is built for
GDN_THREADS = 128  # ninfer::GDN_THREADS
CONV_THREADS = 128  # channels per block of the conv kernel (its __launch_bounds__)


def _on(device: torch.device, *ts) -> bool:
    return all(t is None or t.device == device for t in ts)


def make_gdn_ops(lib: KernelLibrary) -> dict:
    """The Gated DeltaNet launchers for one backend's library, keyed by op name."""
    bv = lib.tuning("NINFER_GDN_BV", 16)  # value columns per block: the grid must agree with the source

    def suffix(t: torch.Tensor):
        if not t.is_cuda:
            return None
        if t.dtype == torch.float32:
            return "f32"
        return DTYPE_SUFFIX[t.dtype] if t.dtype in lib.dtypes else None

    def causal_conv1d_update(x, weight, bias, conv_state):
        s = suffix(x)
        if s is None or x.dim() != 2 or x.shape[0] == 0 or x.stride(1) != 1:
            return ref.causal_conv1d_update(x, weight, bias, conv_state)
        T, C = x.shape
        if (weight.shape != (C, CONV_K) or weight.dtype != x.dtype or not weight.is_contiguous()
                or conv_state.shape != (C, CONV_K - 1) or conv_state.dtype != torch.float32
                or not conv_state.is_contiguous() or not _on(x.device, weight, bias, conv_state)
                or (bias is not None
                    and (bias.shape != (C,) or bias.dtype != x.dtype or not bias.is_contiguous()))):
            return ref.causal_conv1d_update(x, weight, bias, conv_state)
        y = torch.empty(T, C, dtype=x.dtype, device=x.device)  # [T, C]
        new_state = torch.empty(C, CONV_K - 1, dtype=torch.float32, device=x.device)  # [C, K-1]
        lib.module(x.device)[f"causal_conv1d_update_{s}_k{CONV_K}"](
            ((C + CONV_THREADS - 1) // CONV_THREADS,), (CONV_THREADS,),
            x, weight, bias, conv_state, y, new_state, T, C, x.stride(0))
        return y, new_state

    def _fits(q, k, v, g, beta, state) -> bool:
        if suffix(v) is None or q.dim() != 3 or v.dim() != 3 or k.shape != q.shape:
            return False
        T, H, Dv = v.shape
        Hk, Dk = q.shape[1], q.shape[2]
        return (T > 0 and q.shape[0] == T and Dk == HEAD_DIM and Dv == HEAD_DIM and Dv % bv == 0
                and Hk > 0 and H % Hk == 0
                and q.dtype == v.dtype and k.dtype == v.dtype and beta.dtype == v.dtype
                and g.dtype == torch.float32
                and g.shape == (T, H) and beta.shape == (T, H) and g.stride(1) == 1 and beta.stride(1) == 1
                and all(t.stride(2) == 1 and t.stride(1) == t.shape[2] for t in (q, k, v))
                and _on(v.device, q, k, g, beta, state)
                and (state is None or (state.dtype == torch.float32 and state.shape == (H, Dk, Dv)
                                       and state.is_contiguous() and state.data_ptr() % 16 == 0)))

    def _recurrent(q, k, v, g, beta, initial_state, keep_all: bool):
        T, H, Dv = v.shape
        Hk, Dk = q.shape[1], q.shape[2]
        o = torch.empty(T, H, Dv, dtype=v.dtype, device=v.device)  # [T, H, Dv]
        if keep_all:  # verify: the state once each token is in
            states = torch.empty(T, H, Dk, Dv, dtype=torch.float32, device=v.device)  # [T, H, Dk, Dv]
            final = None
        else:
            states = None
            final = torch.empty(H, Dk, Dv, dtype=torch.float32, device=v.device)  # [H, Dk, Dv]
        lib.module(v.device)[f"gdn_recurrent_{suffix(v)}_d{HEAD_DIM}"](
            (Dv // bv, H), (GDN_THREADS,),
            q, k, v, g, beta, initial_state, o, final, states, T, H, Hk,
            q.stride(0), k.stride(0), v.stride(0), g.stride(0), beta.stride(0),
            float(Dk ** -0.5), float(L2_EPS))
        return o, (states if keep_all else final)

    def gdn_recurrent(q, k, v, g, beta, initial_state=None):
        if not _fits(q, k, v, g, beta, initial_state):
            return ref.gdn_recurrent(q, k, v, g, beta, initial_state)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=False)

    def gdn_recurrent_states(q, k, v, g, beta, initial_state=None):
        if not _fits(q, k, v, g, beta, initial_state):
            return ref.gdn_recurrent_states(q, k, v, g, beta, initial_state)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=True)

    def gdn_chunked(q, k, v, g, beta, initial_state=None, chunk_size=64):
        if not _fits(q, k, v, g, beta, initial_state):
            return ref.gdn_chunked(q, k, v, g, beta, initial_state, chunk_size)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=False)  # chunk_size: reference only

    return {"causal_conv1d_update": causal_conv1d_update, "gdn_recurrent": gdn_recurrent,
            "gdn_recurrent_states": gdn_recurrent_states, "gdn_chunked": gdn_chunked}
