"""Reference ops of the Gated DeltaNet mixer (Qwen3.5): causal conv1d and the gated delta rule.

These define the contract GPU kernels meet (registered by name in ``reference.plugin``):

- ``causal_conv1d_prefill`` / ``causal_conv1d_update``: depthwise causal conv over time + SiLU,
  continuing from a conv window of the previous K-1 inputs.
- ``gdn_chunked`` (prefill), ``gdn_recurrent`` (decode), ``gdn_recurrent_states`` (verify: also
  returns the state after every position so speculative decoding can keep any accepted prefix).

The gated delta rule per head, with a state S [Dk, Dv] (fp32), for each token t:
    S <- exp(g_t) * S
    S <- S + beta_t * k_t (v_t - S^T k_t)^T
    o_t = S^T q_t
with q and k L2-normalised (eps 1e-6 inside the rsqrt, as FLA and transformers do) and q scaled
by 1/sqrt(Dk), both done inside the op. Everything is computed in float32; outputs come back in
the dtype of v, states in float32.

Grouped heads: q and k may have fewer heads than v (Qwen3.5: 16 key heads, 48 value heads); key
head i serves value heads i*r .. i*r+r-1 (``repeat_interleave``, as transformers does). Passing
already-repeated q and k gives the same result.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

L2_EPS = 1e-6


# ---- causal conv1d -----------------------------------------------------------------------------

def causal_conv1d_prefill(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                          conv_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal conv + SiLU over a run of tokens.

    x: [T, C] new inputs; weight: [C, K]; bias: [C] or None; conv_state: [C, K-1], the K-1 inputs
    before x (zeros at the start of a sequence). Returns (y [T, C] in x's dtype, new conv_state
    [C, K-1] = the last K-1 inputs, in conv_state's dtype).
    """
    T, C = x.shape
    xs = torch.cat([conv_state.to(x.dtype).t(), x], dim=0)  # [K-1+T, C]
    y = F.conv1d(xs.t().float()[None], weight.float()[:, None, :],
                 None if bias is None else bias.float(), groups=C)[0]  # [C, T]
    y = F.silu(y).t().to(x.dtype)
    return y.contiguous(), xs[T:].t().to(conv_state.dtype).contiguous()


def causal_conv1d_update(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         conv_state: torch.Tensor, out_state: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """The same conv, token by token, for decode (T = 1) and verify (T = k) steps.

    Same signature and result as :func:`causal_conv1d_prefill`; written as a sliding window so it
    is also the step-by-step check of the prefill form. ``out_state`` (optional, may be
    ``conv_state`` itself): where the new window is written, and returned.
    """
    T, C = x.shape
    window = conv_state.float()  # [C, K-1]
    w = weight.float()
    ys = []
    for t in range(T):
        full = torch.cat([window, x[t].float()[:, None]], dim=1)  # [C, K]
        y = (full * w).sum(dim=1)
        if bias is not None:
            y = y + bias.float()
        ys.append(F.silu(y))
        window = full[:, 1:]
    y = torch.stack(ys).to(x.dtype) if T else x.new_zeros(0, C)
    return y, _into(window.to(conv_state.dtype).contiguous(), out_state)


def _into(new: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The ``out_state`` convention: a new state is written into ``out`` (which may be the old
    state: an in-place update) and ``out`` is returned; without ``out`` the fresh tensor is."""
    if out is None:
        return new
    out.copy_(new)
    return out


# ---- gated delta rule --------------------------------------------------------------------------

def _prepare(q, k, v, g, beta):
    """fp32, heads first, q/k L2-normalised and repeated to the value heads, q scaled."""
    r = v.shape[1] // q.shape[1]
    if r > 1:
        q, k = q.repeat_interleave(r, dim=1), k.repeat_interleave(r, dim=1)
    q, k, v = (x.float().transpose(0, 1) for x in (q, k, v))  # [H, T, D]
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + L2_EPS)
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + L2_EPS)
    q = q * q.shape[-1] ** -0.5
    return q, k, v, g.float().t(), beta.float().t()  # g, beta: [H, T]


def _initial(state, H, Dk, Dv, device):
    if state is None:
        return torch.zeros(H, Dk, Dv, dtype=torch.float32, device=device)
    return state.float()


def gdn_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                initial_state: torch.Tensor | None = None, chunk_size: int = 64
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule over a whole run of tokens, chunk by chunk (the prefill form).

    q, k: [T, Hk, Dk]; v: [T, H, Dv]; g: [T, H] log decay (<= 0); beta: [T, H] in (0, 1);
    initial_state: [H, Dk, Dv] or None (zeros). Returns (o [T, H, Dv], final state [H, Dk, Dv] fp32).

    Within a chunk with cumulative log decay G_t = g_1 + ... + g_t and start state S0, the
    corrections u_t = beta_t (v_t - S_{t-1}'^T k_t) solve a unit lower-triangular system
    (I + A) U = beta V - diag(beta e^G) K S0, A[t, j] = beta_t e^(G_t - G_j) k_t.k_j (j < t), so a
    chunk costs a few matmuls and one triangular solve instead of a loop over its tokens.
    """
    T, H, Dv = v.shape
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    Dk = q.shape[-1]
    S = _initial(initial_state, H, Dk, Dv, v.device)
    o = torch.empty(H, T, Dv, dtype=torch.float32, device=v.device)
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        C = e - s
        qc, kc, vc, bc = q[:, s:e], k[:, s:e], v[:, s:e], beta[:, s:e, None]  # [H, C, D], [H, C, 1]
        G = g[:, s:e].cumsum(dim=1)  # [H, C]
        decay = (G[:, :, None] - G[:, None, :])  # [H, C, C]: G_t - G_j
        causal = torch.ones(C, C, dtype=torch.bool, device=v.device).tril()
        decay = torch.where(causal, decay, torch.full_like(decay, float("-inf"))).exp()
        strict = decay.tril(-1)
        A = (bc * kc) @ kc.transpose(1, 2) * strict  # [H, C, C]
        eye = torch.eye(C, dtype=torch.float32, device=v.device).expand(H, C, C)
        rhs = bc * vc - (bc * G.exp()[:, :, None] * kc) @ S  # [H, C, Dv]
        U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        # o_t = e^G_t S0^T q_t + sum_{j<=t} e^(G_t - G_j) (q_t.k_j) u_j
        o[:, s:e] = (G.exp()[:, :, None] * qc) @ S + (qc @ kc.transpose(1, 2) * decay) @ U
        # S_C = e^G_C S0 + sum_j e^(G_C - G_j) k_j u_j^T
        last = G[:, -1:]  # [H, 1]
        S = last.exp()[:, :, None] * S + ((last - G).exp()[:, :, None] * kc).transpose(1, 2) @ U
    return o.transpose(0, 1).to(out_dtype), S


def _recurrent(q, k, v, g, beta, initial_state, keep_all: bool):
    T, H, Dv = v.shape
    out_dtype = v.dtype
    q, k, v, g, beta = _prepare(q, k, v, g, beta)
    S = _initial(initial_state, H, Dk := q.shape[-1], Dv, v.device).clone()
    o = torch.empty(T, H, Dv, dtype=torch.float32, device=v.device)
    states = torch.empty(T, H, Dk, Dv, dtype=torch.float32, device=v.device) if keep_all else None
    for t in range(T):
        S = S * g[:, t].exp()[:, None, None]
        kt = k[:, t]  # [H, Dk]
        delta = beta[:, t, None] * (v[:, t] - torch.einsum("hkv,hk->hv", S, kt))  # [H, Dv]
        S = S + kt[:, :, None] * delta[:, None, :]
        o[t] = torch.einsum("hkv,hk->hv", S, q[:, t])
        if keep_all:
            states[t] = S
    return o.to(out_dtype), (states if keep_all else S)


def gdn_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                  initial_state: torch.Tensor | None = None, out_state: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule token by token (the decode form). Same arguments and result as
    :func:`gdn_chunked`: (o [T, H, Dv], final state [H, Dk, Dv] fp32). ``out_state`` (optional, may
    be ``initial_state`` itself, for an in-place update): where the final state is written."""
    o, final = _recurrent(q, k, v, g, beta, initial_state, keep_all=False)
    return o, _into(final, out_state)


def gdn_recurrent_states(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                         beta: torch.Tensor, initial_state: torch.Tensor | None = None,
                         out_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The verify form: like :func:`gdn_recurrent` but returns the state after every position,
    (o [T, H, Dv], states [T, H, Dk, Dv] fp32), states[i] being the state once token i is in, so
    speculative decoding keeps the state of any accepted length without recomputation.
    ``out_state`` (optional, may be ``initial_state``): also receives the final state."""
    o, states = _recurrent(q, k, v, g, beta, initial_state, keep_all=True)
    if out_state is not None:
        out_state.copy_(states[-1])
    return o, states


def gdn_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
              initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule written out per token and per head, in float64: the oracle the tests hold the
    other forms to. Not registered as an op."""
    T, H, Dv = v.shape
    Hk, Dk = q.shape[1], q.shape[2]
    r = H // Hk
    S = (torch.zeros(H, Dk, Dv, dtype=torch.float64) if initial_state is None
         else initial_state.double().cpu().clone())
    o = torch.zeros(T, H, Dv, dtype=torch.float64)
    for t in range(T):
        for h in range(H):
            qh, kh = q[t, h // r].double().cpu(), k[t, h // r].double().cpu()
            qh = qh / torch.sqrt(qh @ qh + L2_EPS) / Dk ** 0.5
            kh = kh / torch.sqrt(kh @ kh + L2_EPS)
            vh, b = v[t, h].double().cpu(), float(beta[t, h])
            S[h] = S[h] * torch.exp(g[t, h].double().cpu())
            S[h] = S[h] + b * torch.outer(kh, vh - S[h].t() @ kh)
            o[t, h] = S[h].t() @ qh
    return o, S


def gdn_gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-token gates from in_proj_ba's outputs a, b [T, H]: the log-decay
    g = -exp(A_log) * softplus(a + dt_bias) in float32, and beta = sigmoid(b) in the model dtype (as
    transformers computes them)."""
    g = -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())  # [T, H] fp32
    return g, torch.sigmoid(b)


def gdn_in_proj(x: torch.Tensor, weight: torch.Tensor, conv_weight: torch.Tensor, conv_state: torch.Tensor,
                A_log: torch.Tensor, dt_bias: torch.Tensor, conv_dim: int, z_dim: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A decode step's input side of a Gated DeltaNet layer in one op: the projection y = x W^T with W's rows
    [q|k|v (conv_dim) | z (z_dim) | b (H) | a (H)], then :func:`causal_conv1d_update` (no bias; the window
    ``conv_state`` [conv_dim, K-1] fp32 is updated in place) and :func:`gdn_gates` on b and a. x: [T, hidden].
    Returns (q|k|v after the conv and SiLU [T, conv_dim], z [T, z_dim], g [T, H] fp32, beta [T, H])."""
    from .ops import linear

    H = (weight.shape[0] - conv_dim - z_dim) // 2
    mixed, z, b, a = linear(x, weight).split([conv_dim, z_dim, H, H], dim=-1)
    y, _ = causal_conv1d_update(mixed, conv_weight, None, conv_state, out_state=conv_state)
    g, beta = gdn_gates(a, b, A_log, dt_bias)
    return y, z, g, beta


def gdn_recurrent_gated(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                        initial_state: torch.Tensor | None, z: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                        out_state: torch.Tensor | None = None, keep_all: bool = False, fixed: bool = False
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """The decode/verify core of a Gated DeltaNet layer in one op: :func:`gdn_recurrent` (or, with
    ``keep_all``, :func:`gdn_recurrent_states`), then the layer's output norm ``rms_norm_gated(o, z, w, eps)``.
    z: [T, H, Dv] (may be a strided view). Returns (normed o [T, H, Dv] in v's dtype, the final state or,
    with keep_all, the state after every position). ``fixed`` asks a GPU kernel to attach the quantised GEMV's
    fixed-point form of one token's output (ninfer.quant.fixed); here nothing is attached."""
    from .ops import rms_norm_gated

    fn = gdn_recurrent_states if keep_all else gdn_recurrent
    o, st = fn(q, k, v, g, beta, initial_state, out_state)
    return rms_norm_gated(o, z, norm_weight, eps), st


OPS = {
    "gdn_gates": gdn_gates,
    "gdn_in_proj": gdn_in_proj,
    "gdn_recurrent_gated": gdn_recurrent_gated,
    "causal_conv1d_prefill": causal_conv1d_prefill,
    "causal_conv1d_update": causal_conv1d_update,
    "gdn_chunked": gdn_chunked,
    "gdn_recurrent": gdn_recurrent,
    "gdn_recurrent_states": gdn_recurrent_states,
}
