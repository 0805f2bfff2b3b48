"""Launchers for the Gated DeltaNet kernels (``include/ninfer/gdn_kernels.cuh``): decode, verify and prefill.

``causal_conv1d_update``, ``causal_conv1d_prefill``, ``gdn_recurrent``, ``gdn_recurrent_states``, ``gdn_chunked``
and ``gdn_recurrent_gated`` (the recurrence and the layer's gated output norm in one launch, a block per value
head, for decode and verify alike, so both sum in the same order) meet the reference ops of
``ninfer.reference.gdn`` exactly: same arguments, same results, fresh outputs, inputs never modified
(a verify forward reads the conv window and state it passed in after the op, in
``kv.recurrent.RecurrentState.commit_verify``). The kernels themselves allow the new state to alias
the old one, should the contract gain an in-place form. Whatever a kernel was not written for (another
head dim or conv width, mixed dtypes, CPU tensors, heads not contiguous) goes to the reference op.
Prefill's ``gdn_chunked`` runs the chunked form in two launches (``include/ninfer/gdn_chunked.cuh``): every
64-token chunk's WY factors at once, then one pass over the chunks carrying the state.
``NINFER_GDN_CHUNKED=0`` serves it with the token-by-token kernel instead and the prefill conv with the
reference (the prefill path before the chunked kernels, for A/B measurements).
The WY pass (gdn_chunk_prep) is built for 2 blocks per SM (<= 128 registers; at 130 it got one). The state pass runs on tensor cores for fp16/bf16 inputs on sm_80+ (``gdn_chunked_mma.cuh``: 3xTF32 mma.sync,
fp32 accuracy); ``NINFER_GDN_CHUNK_STATE=simt`` (and float32 inputs, and older GPUs) take the CUDA-core pass,
whose value-slice width ``NINFER_GDN_CHUNK_BV=16|32`` picks (16 by default). ``causal_conv1d_prefill`` has
its own kernel (a thread per channel and 64 tokens). Nothing here syncs with the host, so CUDA graphs
capture it. ``rms_norm_gated`` (the output norm) is served by ``ops.py``.
"""

from __future__ import annotations

import functools
import os

import torch

from ..quant.fixed import attach
from ..reference import gdn as ref
from ..reference import ops as ref_ops
from ..reference.gdn import L2_EPS
from .library import DTYPE_SUFFIX, GDN_CHUNK_BVS, KernelLibrary

CONV_K = 4  # conv width the kernels are built for (Qwen3.5: linear_conv_kernel_dim)
HEAD_DIM = 128  # Dk = Dv the gated delta rule kernel is built for
GDN_THREADS = 128  # ninfer::GDN_THREADS
GATED_THREADS = 512  # ninfer::GDN_HEAD_THREADS: gdn_recurrent_gated's block, one per value head
CONV_THREADS = 128  # channels per block of the conv kernel (its __launch_bounds__)
CONV_PREFILL_TOKENS = 64  # ninfer::CONV_PREFILL_TOKENS
CHUNK = 64  # ninfer::GDN_CHUNK
PREP_THREADS = STATE_THREADS = 256  # ninfer::GDN_PREP_THREADS, GDN_STATE_THREADS
MMA_BV, MMA_THREADS = 32, 128  # ninfer::GDN_MMA_BV, GDN_MMA_THREADS (gdn_chunked_mma.cuh)
# dynamic shared memory of gdn_chunk_state_mma (ninfer::gdn_mma_smem_bytes): W [C][132] fp32, q and k [C][136]
# 16-bit, the state [Dk][40] and v_new [C][40] fp32, the gates
MMA_SMEM = CHUNK * 132 * 4 + 2 * CHUNK * 136 * 2 + (HEAD_DIM + CHUNK) * 40 * 4 + (4 * CHUNK + 2) * 4


def prep_smem_bytes(esize: int) -> int:
    """Dynamic shared memory of gdn_chunk_prep (gdn_chunked.cuh): k and q transposed [Dk][C + 16/es] in the
    input dtype, three [C, C] fp32 matrices, five C-float vectors."""
    return 2 * HEAD_DIM * (CHUNK + 16 // esize) * esize + 3 * CHUNK * CHUNK * 4 + 5 * CHUNK * 4


@functools.cache
def smem_optin(device_index: int) -> int:
    """The most dynamic shared memory one block may ask for on this device."""
    props = torch.cuda.get_device_properties(device_index)
    return int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


@functools.cache
def tensor_cores(device_index: int) -> bool:
    """The tensor-core state pass needs sm_80+ (mma.sync TF32, cp.async); modules compile for the device's arch."""
    return torch.cuda.get_device_capability(device_index) >= (8, 0)


def _on(device: torch.device, *ts) -> bool:
    return all(t is None or t.device == device for t in ts)


def make_gdn_ops(lib: KernelLibrary, rms_norm_gated=None) -> dict:
    """The Gated DeltaNet launchers for one backend's library, keyed by op name. ``rms_norm_gated``: the
    backend's output-norm launcher, which ``gdn_recurrent_gated`` composes with the recurrence where its fused
    kernel does not apply (and under ``NINFER_FUSED=0``)."""
    from .fused import fusion_enabled

    fused_gated = fusion_enabled("gdn_recurrent_gated")
    norm_gated = rms_norm_gated or ref_ops.rms_norm_gated
    bv = lib.tuning("NINFER_GDN_BV", 16)  # value columns per block: the grid must agree with the source

    def suffix(t: torch.Tensor):
        if not t.is_cuda:
            return None
        if t.dtype == torch.float32:
            return "f32"
        return DTYPE_SUFFIX[t.dtype] if t.dtype in lib.dtypes else None

    def _state_out(out, like: torch.Tensor) -> bool:
        """An ``out_state`` the kernels can write: absent, or the exact shape, fp32, contiguous, aligned."""
        return out is None or (out.dtype == torch.float32 and out.shape == like.shape and out.is_contiguous()
                               and out.device == like.device and out.data_ptr() % 16 == 0)

    def _conv_fits(x, weight, bias, conv_state) -> bool:
        """The conv kernels' parameters: taps [C, K] and bias [C] in x's dtype, the window fp32 [C, K-1]."""
        C = x.shape[1]
        return (weight.shape == (C, CONV_K) and weight.dtype == x.dtype and weight.is_contiguous()
                and conv_state.shape == (C, CONV_K - 1) and conv_state.dtype == torch.float32
                and conv_state.is_contiguous() and _on(x.device, weight, bias, conv_state)
                and (bias is None or (bias.shape == (C,) and bias.dtype == x.dtype and bias.is_contiguous())))

    def causal_conv1d_update(x, weight, bias, conv_state, out_state=None):
        s = suffix(x)
        if (s is None or x.dim() != 2 or x.shape[0] == 0 or x.stride(1) != 1
                or not _state_out(out_state, conv_state)):
            return ref.causal_conv1d_update(x, weight, bias, conv_state, out_state)
        T, C = x.shape
        if not _conv_fits(x, weight, bias, conv_state):
            return ref.causal_conv1d_update(x, weight, bias, conv_state, out_state)
        y = torch.empty(T, C, dtype=x.dtype, device=x.device)  # [T, C]
        # the kernel reads a channel's whole window before writing it: out_state may be conv_state
        new_state = out_state if out_state is not None else \
            torch.empty(C, CONV_K - 1, dtype=torch.float32, device=x.device)  # [C, K-1]
        lib.module(x.device)[f"causal_conv1d_update_{s}_k{CONV_K}"](
            ((C + CONV_THREADS - 1) // CONV_THREADS,), (CONV_THREADS,),
            x, weight, bias, conv_state, y, new_state, T, C, x.stride(0))
        return y, new_state

    def causal_conv1d_prefill(x, weight, bias, conv_state):
        s = suffix(x)
        if (s is None or x.dim() != 2 or x.shape[0] == 0 or x.stride(1) != 1
                or os.environ.get("NINFER_GDN_CHUNKED", "1") == "0"):  # the whole old prefill path, for A/B
            return ref.causal_conv1d_prefill(x, weight, bias, conv_state)
        T, C = x.shape
        if not _conv_fits(x, weight, bias, conv_state):
            return ref.causal_conv1d_prefill(x, weight, bias, conv_state)
        y = torch.empty(T, C, dtype=x.dtype, device=x.device)  # [T, C]
        new_state = torch.empty(C, CONV_K - 1, dtype=torch.float32, device=x.device)  # [C, K-1]
        lib.module(x.device)[f"causal_conv1d_prefill_{s}_k{CONV_K}"](
            ((C + CONV_THREADS - 1) // CONV_THREADS, (T + CONV_PREFILL_TOKENS - 1) // CONV_PREFILL_TOKENS),
            (CONV_THREADS,), x, weight, bias, conv_state, y, new_state, T, C, x.stride(0))
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

    def _recurrent(q, k, v, g, beta, initial_state, keep_all: bool, out_state=None):
        T, H, Dv = v.shape
        Hk, Dk = q.shape[1], q.shape[2]
        o = torch.empty(T, H, Dv, dtype=v.dtype, device=v.device)  # [T, H, Dv]
        # a block reads its whole state slice before writing it: out_state may be initial_state
        final = out_state
        if keep_all:  # verify: the state once each token is in
            states = torch.empty(T, H, Dk, Dv, dtype=torch.float32, device=v.device)  # [T, H, Dk, Dv]
        else:
            states = None
            if final is None:
                final = torch.empty(H, Dk, Dv, dtype=torch.float32, device=v.device)  # [H, Dk, Dv]
        lib.module(v.device)[f"gdn_recurrent_{suffix(v)}_d{HEAD_DIM}"](
            (Dv // bv, H), (GDN_THREADS,),
            q, k, v, g, beta, initial_state, o, final, states, T, H, Hk,
            q.stride(0), k.stride(0), v.stride(0), g.stride(0), beta.stride(0),
            float(Dk ** -0.5), float(L2_EPS))
        return o, (states if keep_all else final)

    def _out_fits(out, v, q) -> bool:
        return out is None or (out.dtype == torch.float32 and out.shape == (v.shape[1], q.shape[2], v.shape[2])
                               and out.is_contiguous() and out.device == v.device and out.data_ptr() % 16 == 0)

    def gdn_recurrent(q, k, v, g, beta, initial_state=None, out_state=None):
        if not _fits(q, k, v, g, beta, initial_state) or not _out_fits(out_state, v, q):
            return ref.gdn_recurrent(q, k, v, g, beta, initial_state, out_state)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=False, out_state=out_state)

    def gdn_recurrent_states(q, k, v, g, beta, initial_state=None, out_state=None):
        if not _fits(q, k, v, g, beta, initial_state) or not _out_fits(out_state, v, q):
            return ref.gdn_recurrent_states(q, k, v, g, beta, initial_state, out_state)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=True, out_state=out_state)

    def gdn_recurrent_gated(q, k, v, g, beta, initial_state, z, norm_weight, eps, out_state=None, keep_all=False,
                            fixed=False):
        """fixed: for one token the normed output is also written in the fixed-point form of the quantised
        one-token GEMV (ninfer.quant.fixed; a head's 128 values one group), attached to it, for out_proj."""
        T = v.shape[0]
        if (not fused_gated or not _fits(q, k, v, g, beta, initial_state) or not _out_fits(out_state, v, q)
                or z.shape != v.shape or z.dtype != v.dtype or z.stride(2) != 1 or z.stride(1) != v.shape[2]
                or norm_weight.shape != (v.shape[2],) or norm_weight.dtype != v.dtype
                or not norm_weight.is_contiguous() or not _on(v.device, z, norm_weight)):
            fn = gdn_recurrent_states if keep_all else gdn_recurrent
            o, st = fn(q, k, v, g, beta, initial_state, out_state)
            return norm_gated(o, z, norm_weight, eps), st
        H, Dv = v.shape[1], v.shape[2]
        Hk, Dk = q.shape[1], q.shape[2]
        o = torch.empty(T, H, Dv, dtype=v.dtype, device=v.device)  # [T, H, Dv] normed
        final, states = out_state, None
        if keep_all:  # verify: the state once each token is in
            states = torch.empty(T, H, Dk, Dv, dtype=torch.float32, device=v.device)  # [T, H, Dk, Dv]
        elif final is None:
            final = torch.empty(H, Dk, Dv, dtype=torch.float32, device=v.device)  # [H, Dk, Dv]
        xq = xg = None
        if fixed and T == 1 and not keep_all:  # Dv = HEAD_DIM = 128: a head is a group
            xq = torch.empty(2, H * Dv, dtype=torch.int8, device=v.device)
            xg = torch.empty(H, 2, dtype=torch.int32, device=v.device)
        lib.module(v.device)[f"gdn_recurrent_gated_{suffix(v)}_d{HEAD_DIM}"](
            (H,), (GATED_THREADS,), q, k, v, g, beta, initial_state, z, norm_weight, o, final, states, T, H, Hk,
            q.stride(0), k.stride(0), v.stride(0), g.stride(0), beta.stride(0), z.stride(0),
            float(Dk ** -0.5), float(L2_EPS), float(eps), xq, xg)
        if xq is not None:
            attach(o, xq, xg)
        return o, (states if keep_all else final)

    def _chunked(q, k, v, g, beta, initial_state):
        T, H, Dv = v.shape
        Hk, Dk = q.shape[1], q.shape[2]
        dev, s = v.device, suffix(v)
        NC = (T + CHUNK - 1) // CHUNK
        Tp = NC * CHUNK
        f32 = dict(dtype=torch.float32, device=dev)
        W = torch.empty(H, Tp, Dk, **f32)  # [H, Tp, Dk] (I + A)^-1 diag(beta e^G) K per chunk
        U = torch.empty(H, Tp, Dv, **f32)  # [H, Tp, Dv] (I + A)^-1 diag(beta) V
        Aqk = torch.empty(H, NC, CHUNK, CHUNK, **f32)  # [H, NC, C, C] e^(G_t - G_j) q_t.k_j, j <= t
        G = torch.empty(H, Tp, **f32)  # [H, Tp] cumulative log decay within each chunk
        rq = torch.empty(Hk, Tp, **f32)  # [Hk, Tp] q's norm factor (with the scale)
        rk = torch.empty(Hk, Tp, **f32)  # [Hk, Tp] k's norm factor
        mod = lib.module(dev)
        prep = mod[f"gdn_chunk_prep_{s}_d{HEAD_DIM}"]
        smem = prep_smem_bytes(v.element_size())
        prep.set_max_dynamic_smem(smem)
        prep((NC, Hk), (PREP_THREADS,), q, k, v, g, beta, W, U, Aqk, G, rq, rk, T, H, Hk,
             q.stride(0), k.stride(0), v.stride(0), g.stride(0), beta.stride(0), float(Dk ** -0.5), float(L2_EPS),
             smem=smem)
        o = torch.empty(T, H, Dv, dtype=v.dtype, device=dev)  # [T, H, Dv]
        final = torch.empty(H, Dk, Dv, **f32)  # [H, Dk, Dv]
        args = (q, k, W, U, Aqk, G, rq, rk, initial_state, o, final, T, H, Hk, q.stride(0), k.stride(0), NC)
        if _state_mma(v):
            state = mod[f"gdn_chunk_state_mma_{s}_d{HEAD_DIM}"]
            state.set_max_dynamic_smem(MMA_SMEM)
            state((Dv // MMA_BV, H), (MMA_THREADS,), *args, smem=MMA_SMEM)
        else:
            bv = chunk_bv()
            mod[f"gdn_chunk_state_{s}_d{HEAD_DIM}_v{bv}"]((Dv // bv, H), (STATE_THREADS,), *args)
        return o, final

    def _state_mma(v) -> bool:
        """The state pass on tensor cores: 16-bit inputs on sm_80+, unless NINFER_GDN_CHUNK_STATE=simt."""
        return (v.dtype != torch.float32 and os.environ.get("NINFER_GDN_CHUNK_STATE", "mma") != "simt"
                and MMA_SMEM <= smem_optin(v.device.index) and tensor_cores(v.device.index))

    def _chunk_fits(q, k, v) -> bool:
        es = v.element_size()
        return (q.data_ptr() % 16 == 0 and k.data_ptr() % 16 == 0 and (q.stride(0) * es) % 16 == 0
                and (k.stride(0) * es) % 16 == 0 and prep_smem_bytes(es) <= smem_optin(v.device.index))

    def gdn_chunked(q, k, v, g, beta, initial_state=None, chunk_size=64):
        if not _fits(q, k, v, g, beta, initial_state):
            return ref.gdn_chunked(q, k, v, g, beta, initial_state, chunk_size)
        # chunk_size is the reference's; the kernels' chunk is fixed at 64 (the results do not depend on it)
        if os.environ.get("NINFER_GDN_CHUNKED", "1") != "0" and _chunk_fits(q, k, v):
            return _chunked(q, k, v, g, beta, initial_state)
        return _recurrent(q, k, v, g, beta, initial_state, keep_all=False)

    return {"causal_conv1d_update": causal_conv1d_update, "causal_conv1d_prefill": causal_conv1d_prefill,
            "gdn_recurrent": gdn_recurrent, "gdn_recurrent_states": gdn_recurrent_states, "gdn_chunked": gdn_chunked,
            "gdn_recurrent_gated": gdn_recurrent_gated}


def chunk_bv() -> int:
    """Value columns per block of the chunked prefill's CUDA-core state pass (NINFER_GDN_CHUNK_BV, default 16: on the
    H200 at the 27B shape, 1.08 ms per 2048-token call against 1.31 ms for 32, and 9063 vs 8859 tok/s
    prefill at 8K, bench/RESULTS.md)."""
    bv = int(os.environ.get("NINFER_GDN_CHUNK_BV", "16"))
    return bv if bv in GDN_CHUNK_BVS else 16
