"""The Gated DeltaNet mixer (Qwen3.5 "linear_attention" layers).

x -> [q|k|v|z] and [b|a] projections -> depthwise causal conv1d + SiLU on q|k|v -> gated delta
rule (q/k L2-normalised inside the op, 16 key heads shared by 48 value heads) -> RMSNorm with
plain w, gated by silu(z) -> out_proj. Decay g = -exp(A_log) * softplus(a + dt_bias), write
strength beta = sigmoid(b).

Prefill runs the chunked form, decode the recurrent one, verify the recurrent form that keeps the
state after each position (``kv.recurrent.RecurrentState.commit_verify``). Decode and verify run the recurrence
and the output norm as one op (``gdn_recurrent_gated``: one kernel, the same summation order for both); with
dense weights a decode step's projections, conv and gates are one more (``gdn_in_proj``: the GEMV's epilogue), and
with quantised ones likewise where their GEMM offers that form (``with_gdn_in``: ninfer.quant.gpu.quant_gdn_in_proj).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..quant.fixed import carried
from . import register_mixer
from .linear import Linear


@dataclass(frozen=True)
class GDNShape:
    key_heads: int
    value_heads: int
    key_dim: int  # per head
    value_dim: int  # per head
    conv_kernel: int

    @classmethod
    def from_config(cls, cfg) -> "GDNShape":
        e = cfg.extra
        return cls(int(e["linear_num_key_heads"]), int(e["linear_num_value_heads"]),
                   int(e["linear_key_head_dim"]), int(e["linear_value_head_dim"]),
                   int(e.get("linear_conv_kernel_dim", 4)))

    @property
    def conv_dim(self) -> int:  # channels through the conv: q, k and v
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    def num_layers(self, cfg) -> int:
        return cfg.layer_types.count("linear_attention")


@register_mixer("linear_attention")
class GatedDeltaNet:
    def __init__(self, cfg, ops, layer_idx: int, kv_idx: int):
        self.cfg, self.ops = cfg, ops
        self.shape = s = GDNShape.from_config(cfg)
        self.state_idx = cfg.layer_types[:layer_idx].count("linear_attention")  # index into RecurrentState
        self.qk_width = s.key_heads * s.key_dim
        self.v_width = s.value_heads * s.value_dim
        # one GEMM for q|k|v|z and one for b|a (fused from in_proj_qkv + in_proj_z, in_proj_b + in_proj_a)
        self.in_proj = Linear(ops, cfg.hidden_size, s.conv_dim + self.v_width, parts=(s.conv_dim, self.v_width))
        self.in_proj_ba = Linear(ops, cfg.hidden_size, 2 * s.value_heads, parts=(s.value_heads, s.value_heads))
        self.out_proj = Linear(ops, self.v_width, cfg.hidden_size)
        self.conv_weight: torch.Tensor | None = None  # [C, 1, K] as stored
        self.A_log: torch.Tensor | None = None  # [H]
        self.dt_bias: torch.Tensor | None = None  # [H]
        self.norm_weight: torch.Tensor | None = None  # [Dv], plain w (not zero-centred)
        self._gate_params: tuple | None = None  # (A_log, dt_bias as loaded, their fp32 copies)
        self._in_all: torch.Tensor | None = None  # in_proj | in_proj_ba rows in one matrix (dense weights)
        self._qin_all: tuple | None = None  # quantised: (that matrix or None if not joinable, the Linears' weights)
        self.fixed_out = False  # the recurrence also writes out_proj's fixed-point input form (DecoderBlock.plan_fixed)

    def weight_sources(self, prefix: str) -> dict[str, list[str]]:
        p = f"{prefix}.linear_attn"
        return {"in_proj.weight": [f"{p}.in_proj_qkv.weight", f"{p}.in_proj_z.weight"],
                "in_proj_ba.weight": [f"{p}.in_proj_b.weight", f"{p}.in_proj_a.weight"],
                "out_proj.weight": [f"{p}.out_proj.weight"],
                "conv_weight": [f"{p}.conv1d.weight"],
                "A_log": [f"{p}.A_log"], "dt_bias": [f"{p}.dt_bias"],
                "norm_weight": [f"{p}.norm.weight"]}

    def _gates_fp32(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A_log and dt_bias in float32, converted once (not in every step's graph)."""
        p = self._gate_params
        if p is None or p[0] is not self.A_log or p[1] is not self.dt_bias:
            p = self._gate_params = (self.A_log, self.dt_bias, self.A_log.float().contiguous(),
                                     self.dt_bias.float().contiguous())
        return p[2], p[3]

    def _projection(self) -> torch.Tensor | None:
        """in_proj's and in_proj_ba's weights as one [C + H*Dv + 2H, hidden] matrix, rows [q|k|v|z|b|a], whose
        two halves the Linears then view (no second copy): one GEMM instead of two, and the decode GEMV that
        carries the conv and the gates in its epilogue (op gdn_in_proj). Dense weights only (None otherwise);
        made on the first eager call (prefill runs before any graph capture). Quantised weights: see _qprojection."""
        wi, wb = self.in_proj.weight, self.in_proj_ba.weight
        if wi is not None and wb is not None and not isinstance(wi, torch.Tensor) and not isinstance(wb, torch.Tensor):
            return self._qprojection()
        if (not isinstance(wi, torch.Tensor) or not isinstance(wb, torch.Tensor) or wi.dtype != wb.dtype
                or wi.device != wb.device or wi.shape[1] != wb.shape[1]):
            return None
        a, n = self._in_all, wi.shape[0]
        if (a is not None and a.shape[0] == n + wb.shape[0] and wi.data_ptr() == a.data_ptr()
                and wb.data_ptr() == a[n:].data_ptr()):
            return a
        if wi.is_cuda and torch.cuda.is_current_stream_capturing():
            return None
        a = self._in_all = torch.cat([wi, wb]).contiguous()
        self.in_proj.weight, self.in_proj_ba.weight = a[:n], a[n:]
        return a

    def _qprojection(self):
        """Quantised in_proj and in_proj_ba as one weight [q|k|v|z|b|a] (ninfer.quant.QuantWeight; the Linears then
        hold views of its rows, no second copy), where the GEMM of their layout offers the one-launch decode form
        ``with_gdn_in`` (projection, conv and gates: ninfer.quant.gpu.quant_gdn_in_proj) and both share one format.
        Made on the first eager call, and passed through the form's ``prepare`` (if any) outside graph capture."""
        wi, wb = self.in_proj.weight, self.in_proj_ba.weight
        q = self._qin_all
        if q is not None and q[1] is wi and q[2] is wb:
            return q[0]  # joined, or (None) not joinable: decided once for these weights
        if wi.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        fused = None
        if (wi.layout == wb.layout and wi.in_features == wb.in_features and self.in_proj.bias is None
                and self.in_proj_ba.bias is None):
            fused = getattr(self.ops.linear_for(wi.layout), "with_gdn_in", None)
        from ..quant.layout import cat_rows_shared

        both = None if fused is None else cat_rows_shared([wi, wb])
        if both is None:
            self._qin_all = (None, wi, wb)
            return None
        whole, (vi, vb) = both
        prepare = getattr(fused, "prepare", None)
        if prepare is not None:
            whole = prepare(whole)
        self.in_proj.weight, self.in_proj_ba.weight = vi, vb
        self._qin_all = (whole, vi, vb)
        return whole

    def input_weights(self) -> list:
        """The weights that read the layer's input: the joined [q|k|v|z|b|a] weight once made (its row views in the
        Linears may keep the packing they had when it was joined), else in_proj's and in_proj_ba's."""
        q = self._qin_all
        if q is not None and q[0] is not None:
            return [q[0]]
        return [self.in_proj.weight, self.in_proj_ba.weight]

    def output_weight(self):
        """The weight that reads the mixer's output (DecoderBlock.plan_fixed)."""
        return self.out_proj.weight

    def _fixed_kw(self, T: int) -> dict:
        """The recurrence's request for out_proj's fixed-point input form: one token, where planned (fixed_out)."""
        return {"fixed": True} if self.fixed_out and T == 1 else {}

    def _linear_all(self, x: torch.Tensor, W) -> torch.Tensor:
        """x through the one [q|k|v|z|b|a] weight, dense or quantised."""
        return self.ops.linear(x, W) if isinstance(W, torch.Tensor) else self.ops.linear_for(W.layout)(x, W)

    def __call__(self, x: torch.Tensor, ctx) -> torch.Tensor:
        s, ops, state, i = self.shape, self.ops, ctx.state, self.state_idx
        if state is None:
            raise RuntimeError("a Gated DeltaNet layer needs ctx.state (a kv.recurrent.RecurrentState)")
        T = x.shape[0]
        w = self.conv_weight.view(s.conv_dim, s.conv_kernel)  # [C, K]
        W = self._projection()
        fused = None
        if ctx.phase == "decode" and W is not None:  # projection + conv + gates, recurrence + norm: two launches
            if isinstance(W, torch.Tensor):
                fused = ops.gdn_in_proj(x, W, w, state.conv[i], *self._gates_fp32(), s.conv_dim, self.v_width)
            else:  # quantised: the GEMM's one-launch form, None where it does not serve this call
                fused = ops.linear_for(W.layout).with_gdn_in(x, W, w, state.conv[i], *self._gates_fp32(), s.conv_dim,
                                                             self.v_width)
        if fused is not None:
            y, z, g, beta = fused
            q, k, v = y.split([self.qk_width, self.qk_width, self.v_width], dim=-1)
            q = q.reshape(T, s.key_heads, s.key_dim)
            k = k.reshape(T, s.key_heads, s.key_dim)
            v = v.reshape(T, s.value_heads, s.value_dim)
            o, ssm = ops.gdn_recurrent_gated(q, k, v, g, beta, state.ssm[i], z.reshape(T, s.value_heads, s.value_dim),
                                             self.norm_weight, self.cfg.rms_norm_eps, out_state=state.ssm[i],
                                             **self._fixed_kw(T))
            state.commit(i, state.conv[i], ssm, T)
            return self.out_proj(carried(o, o.reshape(T, self.v_width)))
        if W is not None:
            mixed, z, b, a = self._linear_all(x, W).split([s.conv_dim, self.v_width, s.value_heads, s.value_heads],
                                                          dim=-1)
        else:
            mixed, z = self.in_proj(x).split([s.conv_dim, self.v_width], dim=-1)  # [T, C], [T, H*Dv]
            b, a = self.in_proj_ba(x).split([s.value_heads, s.value_heads], dim=-1)  # [T, H] each
        before = state.before_verify(i) if ctx.phase == "verify" else None  # keep(0)'s state, kept aside
        if ctx.phase == "prefill":
            y, conv_state = ops.causal_conv1d_prefill(mixed, w, None, state.conv[i])  # [T, C], [C, K-1]
        else:  # decode/verify update the conv window in place
            y, conv_state = ops.causal_conv1d_update(mixed, w, None, state.conv[i], out_state=state.conv[i])
        q, k, v = y.split([self.qk_width, self.qk_width, self.v_width], dim=-1)
        q = q.reshape(T, s.key_heads, s.key_dim)
        k = k.reshape(T, s.key_heads, s.key_dim)
        v = v.reshape(T, s.value_heads, s.value_dim)
        g, beta = ops.gdn_gates(a, b, *self._gates_fp32())  # [T, H] fp32 log-decay, [T, H] model dtype
        if ctx.phase == "prefill":
            o, ssm = ops.gdn_chunked(q, k, v, g, beta, state.ssm[i])
            state.commit(i, conv_state, ssm, T)
            o = ops.rms_norm_gated(o, z.reshape(T, s.value_heads, s.value_dim), self.norm_weight,
                                   self.cfg.rms_norm_eps)  # [T, H, Dv]
        else:  # decode (quantised projections) and verify: the recurrence and the norm in one op, state in place;
            # verify also keeps the state after every position for keep(accepted)
            verify = ctx.phase == "verify"
            o, st = ops.gdn_recurrent_gated(q, k, v, g, beta, state.ssm[i], z.reshape(T, s.value_heads, s.value_dim),
                                            self.norm_weight, self.cfg.rms_norm_eps, out_state=state.ssm[i],
                                            keep_all=verify, **({} if verify else self._fixed_kw(T)))
            if verify:
                state.commit_verify(i, mixed, st, before)
            else:
                state.commit(i, conv_state, st, T)
        return self.out_proj(carried(o, o.reshape(T, self.v_width)))
