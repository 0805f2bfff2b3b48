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
from .layout import QuantWeight, codes_of, group_for, pack_codes
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
            raise NinferError("--method round and --tune-steps support Llama-family decoders (full attention, plain "
                              f"RMSNorm); {cfg.architecture} layer {i} is not one.")
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

    @classmethod
    def from_quant(cls, W: torch.Tensor, q: QuantWeight) -> "_Learned":
        """The state that reproduces ``q`` (codes, scales, zero points) of the float weight ``W``: its scales as
        s0 (m = 1), its zero points fixed, each offset v the one that puts W / s + v on the stored code
        (clamped to [-0.5, 0.5]; a code clamped at the grid's edge stays there)."""
        n, k = W.shape
        g = q.group_size or k
        lw = cls(W, q.bits, g, q.scales.float().view(n, k // g), q.scales.dtype,
                 None if q.zeros is None else q.zeros.view(n, k // g))
        codes = codes_of(q).float().view(n, k // g, g)
        with torch.no_grad():
            lw.v.copy_((codes - lw.z[..., None] - lw.W / lw.scale()[..., None]).clamp(-0.5, 0.5))
        return lw

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

    @torch.no_grad()
    def recentre(self) -> None:
        """Each offset moved to the centre of its code's rounding interval (W / s + v on the integer), the codes
        unchanged: signed descent leaves many offsets at a rounding boundary (or clamped at +-0.5), where a step
        of any size flips the code; the end-to-end stage starts from here."""
        s, z = self.scale()[..., None], self.z[..., None]
        q = torch.clamp(torch.round(self.W / s + self.v) + z, 0, self.qmax)
        self.v.copy_((q - z - self.W / s).clamp(-0.5, 0.5))

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


class _Model:
    """The decoder as a differentiable float32 function of every block's Linear weights: embeddings, blocks,
    final norm and lm_head (these last kept dense) -> next-token log-probabilities."""

    def __init__(self, llm, blocks: list[_Block]):
        self.blocks = blocks
        self.embed = llm.model.embed_tokens.detach().float().cpu()
        self.norm = llm.model.norm.weight.detach().float().cpu()
        self.head = llm.model.lm_head.weight.detach().float().cpu()
        self.eps = llm.config.rms_norm_eps

    def __call__(self, X: torch.Tensor, ws: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """X [B, T] token ids -> log-probabilities [B, T, V]."""
        x = self.embed[X]
        for blk, w in zip(self.blocks, ws):
            x = blk(x, w)
        return torch.log_softmax(F.linear(_rms(x, self.norm, self.eps), self.head), -1)


def _kl(lp_fp: torch.Tensor, lp_q: torch.Tensor) -> torch.Tensor:
    """Mean per-token KL(fp || q) of log-probabilities [..., V]."""
    return (lp_fp.exp() * (lp_fp - lp_q)).sum(-1).mean()


class _EarlyStop:
    """Judgements of a tuning on held-out windows: ``held()`` at the start and after every ``every``-th step (and
    the last), the best state (``snapshot()``) kept, a stop after ``patience`` judgements without a gain; each
    judgement logged as "<label> step i/n: ..." and the outcome as "<label>: held-out KL a -> b (step k of m run)"."""

    def __init__(self, held, snapshot, steps: int, every: int, patience: int, label: str, log):
        self.held, self.snapshot, self.steps, self.every, self.patience = held, snapshot, steps, every, patience
        self.label, self.log, self.t0 = label, log, time.time()
        self.first = self.best = held()
        self.snap, self.step, self.since = snapshot(), 0, 0

    def judge(self, it: int, train_kl: float) -> bool:
        """After step ``it`` (from 0) with calibration KL ``train_kl``: True when the tuning should stop."""
        if (it + 1) % self.every and it + 1 != self.steps:
            return False
        h = self.held()
        if h < self.best:
            self.best, self.snap, self.step, self.since = h, self.snapshot(), it + 1, 0
        else:
            self.since += 1
        self.log(f"{self.label} step {it + 1}/{self.steps}: calibration KL {train_kl:.4f}, held-out KL {h:.4f} "
                 f"(best {self.best:.4f} at step {self.step}; {time.time() - self.t0:.0f} s)")
        return self.since >= self.patience

    def finish(self, steps_run: int) -> dict:
        self.log(f"{self.label}: held-out KL {self.first:.4f} -> {self.best:.4f} (step {self.step} of {steps_run} run; "
                 f"{time.time() - self.t0:.0f} s)")
        return {"held_before": self.first, "held_after": self.best, "best_step": self.step, "steps_run": steps_run}


def _e2e(model: _Model, learns: list[dict], X: torch.Tensor, X_hold: torch.Tensor, steps: int, batch: int,
         lr: float, every: int, patience: int, gen, log) -> dict:
    """End-to-end stage: every block's rounding offsets and scale factors (zero points fixed) tuned jointly by
    signed gradient descent on KL(float model || quantised model) of the next-token distributions over the
    calibration windows ``X``; the held-out windows ``X_hold`` (never trained on) judge the states, every
    ``every`` steps and at the start: each _Learned is left at the best state on them (the block-wise one if no
    step improves it), and the stage stops after ``patience`` judgements without improvement."""
    params = [p for learn in learns for lw in learn.values() for p in lw.params()]
    with torch.no_grad():
        dense = [blk.dense for blk in model.blocks]
        lp_fp = torch.cat([model(X[i: i + 1], dense) for i in range(X.shape[0])])  # targets, [B, T, V]
        lp_hold = [model(X_hold[i: i + 1], dense) for i in range(X_hold.shape[0])]

    def weights():
        return [{n: lw.weight() for n, lw in learn.items()} for learn in learns]

    @torch.no_grad()
    def held_kl() -> float:
        ws = weights()
        return sum(_kl(lp, model(X_hold[i: i + 1], ws)).item() for i, lp in enumerate(lp_hold)) / len(lp_hold)

    def snapshot():
        return [{n: lw.snapshot() for n, lw in learn.items()} for learn in learns]

    stop = _EarlyStop(held_kl, snapshot, steps, every, patience, "e2e", log)
    losses = []
    for it in range(steps):
        rows = torch.randperm(X.shape[0], generator=gen)[:batch]
        loss = _kl(lp_fp[rows], model(X[rows], weights()))
        for p in params:
            p.grad = None
        loss.backward()
        losses.append(loss.item())
        step = lr * (1 - it / steps)
        with torch.no_grad():
            for learn in learns:
                for lw in learn.values():
                    lw.v -= step * lw.v.grad.sign()
                    lw.v.clamp_(-0.5, 0.5)
                    lw.m -= step * lw.m.grad.sign()
                    lw.m.clamp_(0.5, 1.5)
        if stop.judge(it, sum(losses[-every:]) / len(losses[-every:])):
            break
    for learn, snap in zip(learns, stop.snap):
        for n, lw in learn.items():
            lw.load(snap[n])
    return dict(stop.finish(it + 1 if steps else 0), train_kl=losses)


def _sayer(log, progress: bool):
    """Where the progress lines go: ``log``, else stderr when ``progress``, else nowhere."""
    return log or ((lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None))


def _train_and_held(ids: list[int], window: int, n: int, holdout: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``n`` windows to train on and the ``holdout`` windows after them, from ``ids``."""
    X = _windows(ids, window, n + holdout)
    if X.shape[0] <= holdout:
        raise NinferError(f"The end-to-end stage needs more than {holdout} calibration windows of {window} tokens "
                          f"(the last {holdout} held out); got {X.shape[0]}.")
    n = min(n, X.shape[0] - holdout)
    return X[:n], X[n: n + holdout]


def _windows(ids: list[int], window: int, n: int) -> torch.Tensor:
    rows = [ids[i: i + window] for i in range(0, len(ids) - window + 1, window)][:n]
    if not rows:
        raise NinferError(f"Calibration needs at least {window} tokens; got {len(ids)}.")
    return torch.tensor(rows)


def learned_rounding(llm, calibration: list[int], bits: int = 4, group_size: int = 128,
                     scale_dtype: torch.dtype = torch.bfloat16, iters: int = 50, window: int = 256,
                     windows: int = 16, batch: int = 4, lr: float | None = None, relative: bool = True,
                     init: str = "clip", seed: int = 0, symmetric: bool = True, progress: bool = True,
                     log=None, e2e_steps: int = 0, e2e_lr: float = 0.002, e2e_batch: int = 4, e2e_holdout: int = 3,
                     e2e_every: int = 5, e2e_patience: int = 3, e2e_calibration: list[int] | None = None,
                     e2e_windows: int | None = None, e2e_recentre: bool = True) -> list:
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

    ``e2e_steps`` > 0: after the block-wise stage, an end-to-end stage (:func:`_e2e`) tunes the offsets and scale
    factors of all blocks jointly on KL(float model || quantised model) of the next-token distributions,
    ``e2e_batch`` windows a step, step ``e2e_lr`` decaying linearly to 0, early-stopped on the ``e2e_holdout``
    windows that follow the ``windows`` calibration windows in ``calibration`` (used by neither stage; judged every
    ``e2e_every`` steps, stopping after ``e2e_patience`` judgements without improvement, the best state kept).
    ``e2e_calibration``: other token ids for the end-to-end stage (its first ``e2e_windows`` windows, default
    ``windows``, train it and the ``e2e_holdout`` after them judge it; the block-wise stage keeps ``calibration``).
    ``e2e_recentre``: start the stage with every offset at the centre of its code's interval (codes kept), as
    :func:`e2e_tune` does; otherwise from the block-wise offsets, many at a rounding boundary, where the first
    steps flip codes en masse (on SmolLM2 that raised the held-out KL 0.14 -> 0.51 in 5 steps, bench/RESULTS.md).
    """
    n_hold = e2e_holdout if e2e_steps > 0 else 0
    own = n_hold and e2e_calibration is not None
    X = _windows(calibration, window, windows + (0 if own else n_hold))  # [B, T]
    if n_hold:
        X_e2e, X_hold = _train_and_held(e2e_calibration if own else calibration, window,
                                        (e2e_windows or windows) if own else windows, n_hold)
        if not own:
            X = X_e2e
    if X.shape[1] > llm.runner.cos_sin.shape[0]:
        raise NinferError(f"Calibration window {window} exceeds the model's context {llm.runner.cos_sin.shape[0]}.")
    lr = lr or min(1.0 / iters, 0.05)
    with torch.no_grad():
        x_fp = llm.model.embed_tokens.float().cpu()[X]  # [B, T, H]
    x_q = x_fp.clone()
    out, t0, blocks, learns = [], time.time(), [], []
    say = _sayer(log, progress)
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
            x_q = blk(x_q, {n: lw.weight().detach() for n, lw in learn.items()})
            x_fp = y_fp
        if n_hold:
            blocks.append(blk)
            learns.append(learn)
        out += [(blk.linears[n], lw.quant_weight()) for n, lw in learn.items()]
        say(f"block {i + 1}/{nblocks}: output error {first:.4g} -> {best:.4g} ({time.time() - t0:.0f} s)")
    if n_hold:
        del x_q, x_fp, y_fp
        for learn in learns if e2e_recentre else []:
            for lw in learn.values():
                lw.recentre()
        _e2e(_Model(llm, blocks), learns, X_e2e, X_hold, e2e_steps, e2e_batch, e2e_lr, e2e_every, e2e_patience, gen,
             say)
        out = [(blk.linears[n], lw.quant_weight()) for blk, learn in zip(blocks, learns) for n, lw in learn.items()]
    return out


def e2e_tune(llm, weights: list, calibration: list[int], window: int = 256, windows: int = 32, steps: int = 30,
             batch: int = 4, lr: float = 0.002, holdout: int = 3, every: int = 5, patience: int = 3, seed: int = 0,
             progress: bool = True, log=None) -> list:
    """The end-to-end stage of :func:`learned_rounding` (see there and :func:`_e2e`) applied to existing groupwise
    weights ``weights`` = [(Linear, QuantWeight)] of every decoder block's Linears (e.g. a saved ``round``
    result): each starts from its stored codes, scales and zero points (offsets placed on the stored codes,
    scale factors 1). Returns the tuned [(Linear, QuantWeight)], same layout."""
    say = _sayer(log, progress)
    X, X_hold = _train_and_held(calibration, window, windows, holdout)
    q_of = {id(lin): q for lin, q in weights}
    blocks = [_Block(llm, i) for i in range(len(llm.model.layers))]
    learns = [{n: _Learned.from_quant(blk.dense[n], q_of[id(lin)]) for n, lin in blk.linears.items()} for blk in blocks]
    _e2e(_Model(llm, blocks), learns, X, X_hold, steps, batch, lr, every, patience, torch.Generator().manual_seed(seed),
         say)
    return [(blk.linears[n], lw.quant_weight()) for blk, learn in zip(blocks, learns) for n, lw in learn.items()]


def _rows(q: QuantWeight, r0: int, r1: int) -> QuantWeight:
    return QuantWeight(q.qweight[r0:r1].contiguous(), q.scales[r0:r1].contiguous(), q.bits, q.group_size,
                       q.in_features, zeros=None if q.zeros is None else q.zeros[r0:r1].contiguous())


def checkpoint_weights(src: str, calibration: str | list[int], bits: int, group_size: int,
                       scale_dtype: torch.dtype, progress: bool = True, method: str = "round", symmetric: bool = True,
                       tune: dict | None = None, **kw) -> tuple[dict[str, QuantWeight], dict[str, torch.Tensor]]:
    """Checkpoint tensor name -> QuantWeight for every Linear of the decoder blocks of the model at ``src``
    (loaded unquantised on the CPU), by ``method``: "round" (:func:`learned_rounding` on ``calibration``, ``kw``
    passed on), or "rtn" / "clip" / "gptq" on the loaded model (clip and GPTQ statistics from the first 2048
    calibration tokens, as ``ninfer quantize`` without tuning collects them); then, with ``tune`` (options of
    :func:`.tune.tune_scales_and_norms`, "steps" > 0), the group scales and norm weights tuned end to end.
    Fused parts (q|k|v, gate|up) are split back into the checkpoint's tensors (rows quantise independently).
    Also returns checkpoint name -> new dense tensor (the tuned norm weights; empty without tuning)."""
    from ..llm import LLM
    from ..models import ARCHITECTURES
    from .load import _target
    from .methods import decoder_linears

    window = max(kw.get("window", 256), (tune or {}).get("window", 256))
    llm = LLM(model=src, backend="reference", device="cpu", dtype=torch.float32, progress=progress,
              max_context=max(window, 2048) + 1, quantized_weights=False)
    ids = llm.tokenizer.encode(calibration) if isinstance(calibration, str) else list(calibration)
    if isinstance(kw.get("e2e_calibration"), str):  # text of the end-to-end stage's own calibration
        kw["e2e_calibration"] = llm.tokenizer.encode(kw["e2e_calibration"])
    if method == "round":
        new = learned_rounding(llm, ids, bits, group_size, scale_dtype, progress=progress, symmetric=symmetric, **kw)
    elif method == "clip":
        from .evaluate import clip_quantized

        new = clip_quantized(llm, ids[:2048], bits, group_size, symmetric, scale_dtype)
    elif method == "gptq":
        from .gptq_solve import linear_input_hessians
        from .methods import gptq

        new = gptq(llm, linear_input_hessians(llm, ids[:2048]), bits, group_size, symmetric, scale_dtype)
    else:
        from .methods import rtn

        new = rtn(llm, bits, group_size, symmetric, scale_dtype=scale_dtype)
    norms = []
    if tune and tune.get("steps"):
        from .tune import tune_scales_and_norms

        new, norms = tune_scales_and_norms(llm, new, ids, progress=progress, **tune)
    paths = {id(lin): path for path, lin in decoder_linears(llm)}
    sources = llm.model.weight_sources()
    arch = ARCHITECTURES[llm.config.architecture]
    names = set(llm.checkpoint.tensor_names())

    def name_of(c):
        return next((n for n in arch.names(c) if n in names), c)
    out = {}
    for lin, q in new:
        r0 = 0
        for c in sources[paths[id(lin)]]:
            name = name_of(c)
            r1 = r0 + llm.checkpoint.tensor_shape(name)[0]
            out[name] = _rows(q, r0, r1)
            r0 = r1
        assert r0 == q.scales.shape[0], (paths[id(lin)], r0, q.scales.shape)
    owner = {}
    for path in sources:
        obj, attr = _target(llm.model, path)
        if attr == "weight":
            owner[id(obj)] = path
    dense = {}
    for mod, w in norms:
        (c,) = sources[owner[id(mod)]]
        dense[name_of(c)] = w
    return out, dense
