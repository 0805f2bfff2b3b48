"""Block-wise learned rounding and clipping (after AutoRound, Cheng et al. 2023, "Optimize Weight Rounding
via Signed Gradient Descent"): each decoder block's int4 weights are tuned so that the block's output on
calibration text matches the float model's, one block at a time.

Per Linear: a rounding offset v in [-0.5, 0.5] per weight and a scale factor m per group, starting from the
``clip`` method's scales (:func:`.quantize.search_group_params`, weighted by the block's own calibration
inputs) and v = 0. The weight the block sees is ``s * clamp(round(W / s + v), -2**(b-1), 2**(b-1) - 1)``
with ``s`` the scale times m rounded to the stored dtype (straight-through gradients for both roundings).
Signed gradient descent (AutoRound's optimiser) on the block's output error against the float model's
output; the block's inputs come from the already-quantised blocks before it (so each block can make up for
earlier error), the targets from the float chain. The best (v, m) seen on the loss is kept.

The result is a plain groupwise int4/int8 weight (integer codes and one scale, optionally a zero point,
per group): the same checkpoint format as RTN, so every compressed-tensors reader and our kernels serve it.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

from ..errors import NinferError
from .layout import QuantWeight, group_for, pack_codes
from .quantize import group_params, search_group_params


def _rms(x, w, eps):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * w


def _rope(x, cos, sin, rd):  # x [B, h, T, D]; cos/sin [T, rd/2]
    x1, x2, rest = x[..., : rd // 2], x[..., rd // 2: rd], x[..., rd:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


class _Block:
    """A Llama-family decoder block as a differentiable float32 function of its Linear weights."""

    def __init__(self, llm, i: int):
        cfg = llm.config
        blk = llm.model.layers[i]
        if cfg.layer_types[i] != "full_attention" or cfg.attn_output_gate or cfg.norm_zero_centered:
            raise NinferError("--method round supports Llama-family decoders (full attention, plain RMSNorm); "
                              f"{cfg.architecture} layer {i} is not one.")
        a = blk.mixer
        self.cfg, self.hq, self.hk, self.d = cfg, a.hq, a.hk, a.d
        f = lambda t: None if t is None else t.detach().float().cpu()  # noqa: E731
        self.in_norm, self.post_norm = f(blk.input_norm.weight), f(blk.post_norm.weight)
        self.qkv_bias = f(getattr(a.qkv, "bias", None))
        self.q_norm = f(a.q_norm.weight) if a.q_norm is not None else None
        self.k_norm = f(a.k_norm.weight) if a.k_norm is not None else None
        self.linears = {"qkv": a.qkv, "o": a.o, "gate_up": blk.mlp.gate_up, "down": blk.mlp.down}
        self.dense = {k: f(v.weight) for k, v in self.linears.items()}
        cs = llm.runner.cos_sin.float().cpu()
        self.rd = cs.shape[-1]
        self.cos_sin = cs

    def __call__(self, x: torch.Tensor, w: dict[str, torch.Tensor], record: dict | None = None) -> torch.Tensor:
        """x [B, T, H] -> block output [B, T, H]; ``record``: name -> sum of squared inputs [K] (added to)."""
        B, T, _ = x.shape
        eps = self.cfg.rms_norm_eps

        def lin(name, inp, bias=None):
            if record is not None:
                record[name] = record.get(name, 0) + inp.detach().reshape(-1, inp.shape[-1]).square().sum(0)
            return F.linear(inp, w[name], bias)

        a = _rms(x, self.in_norm, eps)
        q, k, v = lin("qkv", a, self.qkv_bias).split([self.hq * self.d, self.hk * self.d, self.hk * self.d], -1)
        q = q.view(B, T, self.hq, self.d).transpose(1, 2)
        k = k.view(B, T, self.hk, self.d).transpose(1, 2)
        v = v.view(B, T, self.hk, self.d).transpose(1, 2)
        if self.q_norm is not None:
            q, k = _rms(q, self.q_norm, eps), _rms(k, self.k_norm, eps)
        cos, sin = self.cos_sin[:T, : self.rd // 2], self.cos_sin[:T, self.rd // 2:]
        q, k = _rope(q, cos, sin, self.rd), _rope(k, cos, sin, self.rd)
        rep = self.hq // self.hk
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.d ** -0.5)
        h = x + lin("o", o.transpose(1, 2).reshape(B, T, self.hq * self.d))
        g, u = lin("gate_up", _rms(h, self.post_norm, eps)).chunk(2, -1)
        return h + lin("down", F.silu(g) * u)


class _Learned:
    """One Linear's learnable rounding offsets v [N, K] and group scale factors m [N, G]; integer zero points z
    [N, G] (unsigned domain, fixed at their initial values; 2**(bits-1) everywhere when symmetric)."""

    def __init__(self, W: torch.Tensor, bits: int, g: int, s0: torch.Tensor, scale_dtype: torch.dtype,
                 z: torch.Tensor | None = None):
        n, k = W.shape
        self.n, self.k, self.g, self.bits, self.dtype = n, k, g, bits, scale_dtype
        self.W = W.float().view(n, k // g, g)
        self.s0 = s0.float()
        self.sym = z is None
        self.z = torch.full_like(self.s0, float(1 << (bits - 1))) if z is None else z.float()
        self.v = torch.zeros_like(self.W, requires_grad=True)
        self.m = torch.ones_like(self.s0, requires_grad=True)
        self.qmax = (1 << bits) - 1

    def scale(self):
        s = self.s0 * self.m
        sr = s.to(self.dtype).float()
        sr = torch.where(sr == 0, torch.finfo(self.dtype).eps, sr)
        return s + (sr - s).detach()  # straight-through rounding to the stored dtype

    def weight(self):
        s, z = self.scale()[..., None], self.z[..., None]
        x = self.W / s + self.v
        q = torch.clamp(x + (torch.round(x) - x).detach() + z, 0, self.qmax)  # straight-through round
        return ((q - z) * s).view(self.n, self.k)

    def params(self):
        return [self.v, self.m]

    def snapshot(self):
        return self.v.detach().clone(), self.m.detach().clone()

    def load(self, snap):
        with torch.no_grad():
            self.v.copy_(snap[0])
            self.m.copy_(snap[1])

    @torch.no_grad()
    def quant_weight(self) -> QuantWeight:
        s = self.scale().detach()
        q = torch.clamp(torch.round(self.W / s[..., None] + self.v) + self.z[..., None], 0, self.qmax)
        return QuantWeight(pack_codes(q.view(self.n, self.k), self.bits), s.to(self.dtype), self.bits, self.g, self.k,
                           zeros=None if self.sym else self.z.to(torch.uint8))


def _tune(blk: _Block, learn: dict, x_q, y_fp, iters: int, batch: int, lr: float, relative: bool, gen
          ) -> tuple[float, float]:
    """Signed gradient descent on the block's output error; leaves each _Learned at the best state seen
    (full batch) or the last (mini-batches). Returns the error before and after, on all windows."""
    params = [p for lw in learn.values() for p in lw.params()]
    den = y_fp.square().sum(-1) if relative else torch.full(y_fp.shape[:2], float(y_fp.shape[-1]))

    def loss_of(rows):
        y = blk(x_q[rows], {n: lw.weight() for n, lw in learn.items()})
        return ((y - y_fp[rows]).square().sum(-1) / den[rows]).mean()

    def snapshot():
        return {n: lw.snapshot() for n, lw in learn.items()}

    B = x_q.shape[0]
    with torch.no_grad():
        first = loss_of(slice(None)).item()
    best, best_snap = first, snapshot()
    for it in range(iters):
        rows = torch.randperm(B, generator=gen)[:batch] if batch < B else slice(None)
        loss = loss_of(rows)
        if batch >= B and loss.item() < best:  # full batch: the loss of the weights as they are now
            best, best_snap = loss.item(), snapshot()
        for p in params:
            p.grad = None
        loss.backward()
        step = lr * (1 - it / iters)
        with torch.no_grad():
            for lw in learn.values():
                lw.v -= step * lw.v.grad.sign()
                lw.v.clamp_(-0.5, 0.5)
                lw.m -= step * lw.m.grad.sign()
                lw.m.clamp_(0.5, 1.5)
    with torch.no_grad():
        last = loss_of(slice(None)).item()
    if last < best:  # (mini-batches: the last state unless the initial one is better)
        best, best_snap = last, snapshot()
    for n, lw in learn.items():
        lw.load(best_snap[n])
    return first, best


def _windows(ids: list[int], window: int, n: int) -> torch.Tensor:
    rows = [ids[i: i + window] for i in range(0, len(ids) - window + 1, window)][:n]
    if not rows:
        raise NinferError(f"Calibration needs at least {window} tokens; got {len(ids)}.")
    return torch.tensor(rows)


def learned_rounding(llm, calibration: list[int], bits: int = 4, group_size: int = 128,
                     scale_dtype: torch.dtype = torch.bfloat16, iters: int = 50, window: int = 256,
                     windows: int = 16, batch: int = 4, lr: float | None = None, relative: bool = True,
                     init: str = "clip", seed: int = 0, symmetric: bool = True, progress: bool = True,
                     log=None) -> list:
    """[(Linear, QuantWeight)] for every Linear of the decoder blocks of ``llm`` (reference backend, float32
    weights), ``bits`` with groups of ``group_size`` (smaller where the input size needs it), symmetric or with an
    integer zero point per group (``symmetric=False``: the zero points of the asymmetric ``clip`` search, kept;
    the offsets and scales learned as in the symmetric case).

    ``calibration``: token ids, cut into ``windows`` windows of ``window`` tokens, each from position 0 (its
    first token an attention sink, as a prompt's is); ``batch`` windows per step; ``iters`` steps of signed
    gradient descent per block with the step ``lr`` (default 1 / iters as AutoRound, at most 0.05: each step moves
    every offset by ``lr``) decaying linearly to 0.
    ``relative``: each token's squared output error divided by its float output's squared norm (every reader
    of the residual stream normalises it first; the attention-sink token, hundreds of times larger in some
    blocks, would otherwise be all of the loss). ``init``: "clip" (activation-weighted scale search) or
    "rtn" (nothing clipped). ``seed``: of the windows drawn for each step.
    """
    X = _windows(calibration, window, windows)  # [B, T]
    if X.shape[1] > llm.runner.cos_sin.shape[0]:
        raise NinferError(f"Calibration window {window} exceeds the model's context {llm.runner.cos_sin.shape[0]}.")
    lr = lr or min(1.0 / iters, 0.05)
    with torch.no_grad():
        x_fp = llm.model.embed_tokens.float().cpu()[X]  # [B, T, H]
    x_q = x_fp.clone()
    out, t0 = [], time.time()
    gen = torch.Generator().manual_seed(seed)  # the windows of each step: reproducible
    nblocks = len(llm.model.layers)
    for i in range(nblocks):
        blk = _Block(llm, i)
        with torch.no_grad():
            y_fp = blk(x_fp, blk.dense)  # target: the float chain
            rec: dict = {}
            blk(x_q, blk.dense, rec)  # the quantised chain's inputs weigh the initial clip search
        learn = {}
        for name, W in blk.dense.items():
            g = group_for(W.shape[1], group_size)
            Wg = W.view(W.shape[0], -1, g)
            if init == "clip":
                s0, z = search_group_params(Wg, bits, symmetric, scale_dtype, (rec[name] / X.numel()).view(1, -1, g))
            else:
                s0, z = group_params(Wg, bits, symmetric, scale_dtype)
            learn[name] = _Learned(W, bits, g, s0, scale_dtype, None if symmetric else z)
        first, best = _tune(blk, learn, x_q, y_fp, iters, batch, lr, relative, gen)
        with torch.no_grad():
            wq = {}
            for n, lw in learn.items():
                q = lw.quant_weight()
                out.append((blk.linears[n], q))
                wq[n] = lw.weight().detach()
            x_q = blk(x_q, wq)
            x_fp = y_fp
        msg = (f"block {i + 1}/{nblocks}: output error {first:.4g} -> {best:.4g} "
               f"({time.time() - t0:.0f} s)")
        if log is not None:
            log(msg)
        elif progress:
            print(msg, file=sys.stderr, flush=True)
    return out


def _rows(q: QuantWeight, r0: int, r1: int) -> QuantWeight:
    return QuantWeight(q.qweight[r0:r1].contiguous(), q.scales[r0:r1].contiguous(), q.bits, q.group_size,
                       q.in_features, zeros=None if q.zeros is None else q.zeros[r0:r1].contiguous())


def checkpoint_weights(src: str, calibration: str | list[int], bits: int, group_size: int,
                       scale_dtype: torch.dtype, progress: bool = True, **kw) -> dict[str, QuantWeight]:
    """Checkpoint tensor name -> QuantWeight for every Linear of the decoder blocks of the model at ``src``
    (loaded unquantised on the CPU), tuned by :func:`learned_rounding` on ``calibration``; fused parts
    (q|k|v, gate|up) split back into the checkpoint's tensors (rows quantise independently)."""
    from ..llm import LLM
    from ..models import ARCHITECTURES
    from .methods import decoder_linears

    window = kw.get("window", 256)
    llm = LLM(model=src, backend="reference", device="cpu", dtype=torch.float32, progress=progress,
              max_context=window + 1, quantized_weights=False)
    ids = llm.tokenizer.encode(calibration) if isinstance(calibration, str) else list(calibration)
    new = learned_rounding(llm, ids, bits, group_size, scale_dtype, progress=progress, **kw)
    paths = {id(lin): path for path, lin in decoder_linears(llm)}
    sources = llm.model.weight_sources()
    arch = ARCHITECTURES[llm.config.architecture]
    names = set(llm.checkpoint.tensor_names())
    out = {}
    for lin, q in new:
        r0 = 0
        for c in sources[paths[id(lin)]]:
            name = next((n for n in arch.names(c) if n in names), c)
            r1 = r0 + llm.checkpoint.tensor_shape(name)[0]
            out[name] = _rows(q, r0, r1)
            r0 = r1
        assert r0 == q.scales.shape[0], (paths[id(lin)], r0, q.scales.shape)
    return out
