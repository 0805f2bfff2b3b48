"""Reference implementations of every op, in plain PyTorch.

These define each op's contract (shapes, dtypes, semantics); kernels in the GPU backends must
match them. Reductions run in float32 whatever the input dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ W^T (+ b). x: [..., K], weight: [N, K] -> [..., N]."""
    return F.linear(x, weight, bias)


def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """ids: [T] int64, table: [V, H] -> [T, H]."""
    return table[ids]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, zero_centered: bool = False) -> torch.Tensor:
    """RMSNorm over the last dim. zero_centered scales by (1 + w) (Qwen3.5), else by w."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    w = weight.float()
    y = y * (1.0 + w) if zero_centered else y * w
    return y.to(x.dtype)


def rms_norm_gated(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Gated DeltaNet output norm: plain-w RMSNorm of x, times silu(z). x, z: [..., D], weight: [D]."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return (y * F.silu(z.float())).to(x.dtype)


def rope_cos_sin(max_positions: int, rotary_dim: int, theta: float, scaling: dict | None = None,
                 device=None) -> torch.Tensor:
    """The cos/sin table every rope op reads: [max_positions, rotary_dim] as [cos | sin] halves."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    kind, magnitude = (scaling or {}).get("rope_type", (scaling or {}).get("type")), 1.0
    if kind == "llama3":
        inv_freq = _llama3_scale(inv_freq, scaling)
    elif kind == "linear":
        inv_freq = inv_freq / float(scaling["factor"])
    elif kind == "yarn":
        inv_freq, magnitude = _yarn_scale(inv_freq, scaling, rotary_dim, theta)
    t = torch.arange(max_positions, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)  # [P, rotary_dim/2]
    return (torch.cat([freqs.cos(), freqs.sin()], dim=-1) * magnitude).float().to(device)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    import math

    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_scale(inv_freq: torch.Tensor, s: dict, rotary_dim: int, theta: float) -> tuple[torch.Tensor, float]:
    """YaRN (arXiv 2309.00071, as transformers computes it): frequencies that turn fewer than beta_slow times over
    the pretraining context are interpolated by ``factor``, those that turn more than beta_fast times are kept, a
    linear ramp between; cos and sin are scaled by the attention factor (0.1 ln(factor) + 1 unless given)."""
    import math

    old = float(s["original_max_position_embeddings"])
    factor = float(s["factor"])
    attn = s.get("attention_factor")
    if attn is None:
        m, m_all = s.get("mscale"), s.get("mscale_all_dim")
        attn = _yarn_mscale(factor, m) / _yarn_mscale(factor, m_all) if m and m_all else _yarn_mscale(factor)

    def dim_of(rotations: float) -> float:  # the dimension whose frequency turns `rotations` times over `old`
        return rotary_dim * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = dim_of(float(s.get("beta_fast") or 32)), dim_of(float(s.get("beta_slow") or 1))
    if s.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, rotary_dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (the frequency as trained), 0: interpolate (divided by factor)
    return inv_freq / factor * (1 - keep) + inv_freq * keep, float(attn)


def _llama3_scale(inv_freq: torch.Tensor, s: dict) -> torch.Tensor:
    import math

    factor, lo, hi = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv_freq
    smooth = (old / wavelen - lo) / (hi - lo)
    scaled = torch.where(wavelen > old / lo, inv_freq / factor, inv_freq)
    mid = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    is_mid = (wavelen <= old / lo) & (wavelen >= old / hi)
    return torch.where(is_mid, mid, scaled)


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half (NeoX) RoPE on the first rotary_dim dims of each head.

    q: [T, Hq, D], k: [T, Hk, D], positions: [T] int64, cos_sin: [P, rotary_dim] -> (q, k) new tensors.
    """
    rd = cos_sin.shape[-1]
    cs = cos_sin[positions]  # [T, rd]
    cos, sin = cs[:, None, : rd // 2], cs[:, None, rd // 2:]

    def rot(x):
        xf = x.float()
        x1, x2, rest = xf[..., : rd // 2], xf[..., rd // 2: rd], xf[..., rd:]
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)
        return out.to(x.dtype)

    return rot(q), rot(k)


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """SwiGLU: x = [gate | up] on the last dim -> silu(gate) * up."""
    g, u = x.chunk(2, dim=-1)
    return (F.silu(g.float()) * u.float()).to(x.dtype)


def write_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slots: torch.Tensor) -> None:
    """Store new keys/values. k, v: [T, Hk, D]; caches: [blocks, block_size, Hk, D]; slots: [T] int64."""
    kc = k_cache.view(-1, *k_cache.shape[2:])
    vc = v_cache.view(-1, *v_cache.shape[2:])
    kc[slots] = k.to(kc.dtype)
    vc[slots] = v.to(vc.dtype)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                 zero_centered: bool = False, fixed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual add and the RMSNorm after it: h = x + residual (in x's dtype) -> (rms_norm(h), h).
    ``fixed`` asks a GPU kernel to attach the quantised GEMV's fixed-point form of the row (ninfer.quant.fixed);
    here nothing is attached, and a quantised GEMV takes the row itself."""
    h = x + residual
    return rms_norm(h, weight, eps, zero_centered), h


def rope_write_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                  cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor,
                  q_norm: torch.Tensor | None = None, k_norm: torch.Tensor | None = None, eps: float = 1e-6,
                  zero_centered: bool = False) -> torch.Tensor:
    """The attention layer between its qkv projection and attention: per-head RMSNorm of q and k (when
    q_norm/k_norm are given), RoPE, k and v into the cache. q: [T, Hq, D], k, v: [T, Hk, D] -> rotated q."""
    if q_norm is not None:
        q, k = rms_norm(q, q_norm, eps, zero_centered), rms_norm(k, k_norm, eps, zero_centered)
    q, k = rope(q, k, positions, cos_sin)
    write_kv(k, v, k_cache, v_cache, slots)
    return q


def linear_silu_mul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The MLP's gate_up projection and SwiGLU: weight [2I, K] as [gate | up] rows, x [..., K] -> [..., I]."""
    return silu_mul(linear(x, weight))


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    block_table: torch.Tensor, positions: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of new queries over one sequence's paged cache (prefill, decode, verify).

    q: [T, Hq, D]; caches: [blocks, block_size, Hk, D]; block_table: [n] int32; positions: [T] int64,
    ascending, the position of each query: query i attends keys 0..positions[i]. -> [T, Hq, D].

    The caller's promise (built with NINFER_PDL_EARLY_LOADS=1, the decode kernels read the older cache before the op
    just ahead of them has finished): that op writes no key below positions[0] (it is the KV write of these queries'
    own tokens, or nothing).
    """
    T, Hq, D = q.shape
    bs, Hk = k_cache.shape[1], k_cache.shape[2]
    L = int(positions[-1].item()) + 1
    nblk = (L + bs - 1) // bs
    blocks = block_table[:nblk].long()
    k = k_cache[blocks].reshape(-1, Hk, D)[:L].float()  # [L, Hk, D]
    v = v_cache[blocks].reshape(-1, Hk, D)[:L].float()
    g = Hq // Hk
    qf = q.float().view(T, Hk, g, D)
    s = torch.einsum("thgd,lhd->hgtl", qf, k) * scale  # [Hk, g, T, L]
    mask = torch.arange(L, device=q.device)[None, :] > positions[:, None]  # [T, L]
    s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("hgtl,lhd->thgd", p, v)
    return o.reshape(T, Hq, D).to(q.dtype)


def sigmoid_mul(x: torch.Tensor, gate: torch.Tensor, fixed: bool = False) -> torch.Tensor:
    """The attention output gate (Qwen3.5): x * sigmoid(gate) in x's dtype; x, gate: [T, H, D] (gate may be a
    strided view into the q projection's output). ``fixed`` asks a GPU kernel to attach the quantised GEMV's
    fixed-point form of one token's output (ninfer.quant.fixed); here nothing is attached."""
    return x * torch.sigmoid(gate)


def attention_gated(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    positions: torch.Tensor, scale: float, gate: torch.Tensor, fixed: bool = False) -> torch.Tensor:
    """Qwen3.5's gated attention output: ``sigmoid_mul(paged_attention(q, ...), gate, fixed)`` (caches in the model
    dtype). A GPU backend applies the gate in the kernel that merges the attention's splits: one launch fewer."""
    return sigmoid_mul(paged_attention(q, k_cache, v_cache, block_table, positions, scale), gate, fixed)


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """logits: [T, V] -> [T] int64, the greedy token of each row."""
    return logits.argmax(dim=-1)


OPS = {
    "linear": linear,
    "embedding": embedding,
    "rms_norm": rms_norm,
    "rms_norm_gated": rms_norm_gated,
    "rope": rope,
    "silu_mul": silu_mul,
    "write_kv": write_kv,
    "add_rms_norm": add_rms_norm,
    "rope_write_kv": rope_write_kv,
    "linear_silu_mul": linear_silu_mul,
    "paged_attention": paged_attention,
    "attention_gated": attention_gated,
    "argmax": argmax,
    "sigmoid_mul": sigmoid_mul,
}
