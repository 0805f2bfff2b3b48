"""Which target hidden state should the MTP drafter read: post- or pre-final-norm? (issue #6)

No real MTP weights can be had here, so this trains two MTP heads on the real default model
(SmolLM2-135M-Instruct, a Llama; its Q4_1 GGUF dequantised to float32 and written as a safetensors
directory) with identical data, budget, seeds and initialisation: one fed the target's hidden state
after the final norm (what ``mtp:k,hidden=post`` feeds), one fed the residual stream before it
(``hidden=pre``). Each head is then written as ``mtp.*`` tensors next to the model and measured with
ninfer's own speculative path, ``LLM(path, draft="mtp:k,hidden=...")``, greedy, on held-out prompts:
acceptance (accepted / drafted), tokens per target forward, and the output checked equal to plain
greedy. Whole chains are verified (NINFER_VERIFY_WIDTH=max) so acceptance is not filtered by the
CPU's verify-cost policy.

The training forward is exactly what the drafter computes (checked against ``MTPDrafter._step``
before measuring): position p reads (h_p, embed(x_{p+1})) and predicts x_{p+2}; a chained step at
depth d reads, instead of h_p, the head's depth-(d-1) output at p-1 (after the head's norm for
``post``, before it for ``pre``) and attends the depth-1 keys up to p-d+1 plus the chained keys of
positions p-d+2..p, as the drafter's KV cache holds them. Two training regimes: ``d1`` trains the
first step only (how MTP heads are usually trained; chaining is then out of distribution) and
``d2`` adds the first chained step's loss (training-time unrolling).

Data: the Python standard library's own ``*.py`` sources (PSF licence), split by file: a stable hash
of the path puts ~1 in 5 files in the held-out set (offline agreement chunks and the prompts).

CPU only: ``python bench/mtp_hidden.py`` (about 26 min of one core at the defaults; checkpoints go
to a temp dir, ``--keep DIR`` keeps them). ``--quick`` is a smoke run.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from ninfer import LLM, SamplingParams
from ninfer.llm import default_model_path
from ninfer.reference.ops import rms_norm, rope
from ninfer.weights import open_checkpoint

torch.set_num_threads(1)


# -- the model as a safetensors directory -----------------------------------------------------------
def convert(gguf: str, out: str) -> None:
    """The GGUF dequantised to float32 with its tokenizer, as a Hugging Face directory ninfer opens."""
    ck = open_checkpoint(gguf)
    os.makedirs(out, exist_ok=True)
    save_file({n: ck.get(n).contiguous() for n in ck.tensor_names()}, os.path.join(out, "model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(ck.config, f)
    tok = ck.tokenizer()
    tok._hf.save(os.path.join(out, "tokenizer.json"))
    st = ck.special_tokens()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": st["bos_token"], "eos_token": st["eos_token"], "chat_template": ck.chat_template,
                   "add_bos_token": tok.add_bos_token}, f)


def head_dir(base: str, out: str, tensors: dict[str, torch.Tensor]) -> str:
    """A copy of the model (its files linked) plus the head as mtp.safetensors, as the drafter loads it."""
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for fn in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
        os.symlink(os.path.join(base, fn), os.path.join(out, fn))
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, "mtp.safetensors"),
              metadata={"format": "pt"})
    return out


# -- data ---------------------------------------------------------------------------------------------
def stdlib_files() -> tuple[list[str], list[str]]:
    root = os.path.dirname(os.__file__)
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs if s not in ("site-packages", "__pycache__")
                            and not s.startswith("test") and s != "tests" and s != "idle_test")
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    held = [f for f in files if int(hashlib.md5(os.path.relpath(f, root).encode()).hexdigest(), 16) % 5 == 0]
    return [f for f in files if f not in set(held)], held


def read_ids(tok, path: str) -> list[int]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return tok.encode(f.read())


def chunks_from(tok, files: list[str], n: int, T: int, rng: random.Random, per_file: int = 2) -> list[list[int]]:
    """n chunks of T tokens, at most per_file from each file, files in a seeded order."""
    files = files[:]
    rng.shuffle(files)
    out = []
    for fn in files:
        ids = read_ids(tok, fn)
        starts = list(range(0, len(ids) - T + 1, T))
        rng.shuffle(starts)
        out += [ids[s: s + T] for s in starts[:per_file]]
        if len(out) >= n:
            return out[:n]
    return out


@torch.inference_mode()
def collect(llm, chunks: list[list[int]]):
    """The target's post-norm and pre-norm hidden states of each chunk (reference backend, float32)."""
    r = llm.runner
    post, pre = [], []
    for ids in chunks:
        r.reset()
        post.append(r.forward(ids, "prefill").clone())
        pre.append(r.last_ctx.hidden_pre_norm.clone())
    r.reset()
    return post, pre


def collect_data(llm, chunks: list[list[int]]):
    post, pre = collect(llm, chunks)  # stacked outside inference mode: ordinary tensors autograd may save
    return torch.stack(post), torch.stack(pre), torch.tensor(chunks)


# -- the trainable head: the drafter's computation in autograd ---------------------------------------
class Head(torch.nn.Module):
    def __init__(self, llm, seed: int):
        super().__init__()
        cfg, m = llm.config, llm.model
        assert not (cfg.qk_norm or cfg.attn_output_gate or cfg.attention_bias or cfg.norm_zero_centered), \
            "this trainer covers Llama-style layers"
        H, self.hq, self.hk, self.d = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.eps, self.inter = cfg.rms_norm_eps, cfg.intermediate_size
        g = torch.Generator().manual_seed(seed)
        P = torch.nn.Parameter
        last = m.layers[-1]  # the layer starts as a copy of the target's last layer; fc random
        self.fc = P(torch.randn(H, 2 * H, generator=g) / math.sqrt(2 * H))
        self.norm_e, self.norm_h = P(torch.ones(H)), P(torch.ones(H))
        self.norm = P(m.norm.weight.clone())  # feeds the shared lm_head, as the final norm does
        self.in_norm, self.post_norm = P(last.input_norm.weight.clone()), P(last.post_norm.weight.clone())
        self.qkv, self.o = P(last.mixer.qkv.weight.clone()), P(last.mixer.o.weight.clone())
        self.gate_up, self.down = P(last.mlp.gate_up.weight.clone()), P(last.mlp.down.weight.clone())
        self.embed = m.embed_tokens  # frozen, shared with the target
        self.lm_head16 = m.lm_head.weight.to(torch.bfloat16)  # frozen; bf16 for the CPU's sake
        self.cos_sin = llm.runner.cos_sin

    def rms(self, x, w):
        return rms_norm(x, w, self.eps)

    def logits(self, y):  # y: the head's output before its norm
        return (self.rms(y, self.norm).to(torch.bfloat16) @ self.lm_head16.T).float()

    def attend(self, q, ks, vs, depth):
        """q: [B, Hq, P, D]; ks/vs: per depth [B, Hk, P, D]. Depth-1 keys j <= p-depth+1, then the
        chained key of depth r at position p-(depth-r), r = 2..depth (the drafter's cache)."""
        B, _, P, D = q.shape
        grp = self.hq // self.hk
        k1, v1 = (t.repeat_interleave(grp, dim=1) for t in (ks[0], vs[0]))
        if depth == 1:
            return F.scaled_dot_product_attention(q, k1, v1, is_causal=True)
        pos = torch.arange(P)
        s = (q @ k1.transpose(-1, -2)) * D ** -0.5
        s = s.masked_fill(pos[None, :] > pos[:, None] - (depth - 1), float("-inf"))
        extra, vals = [], []
        for r in range(2, depth + 1):
            sh = depth - r
            k = F.pad(ks[r - 1], (0, 0, sh, 0))[:, :, :P].repeat_interleave(grp, dim=1)
            v = F.pad(vs[r - 1], (0, 0, sh, 0))[:, :, :P].repeat_interleave(grp, dim=1)
            e = (q * k).sum(-1, keepdim=True) * D ** -0.5
            extra.append(e.masked_fill((pos < sh)[:, None], float("-inf")))
            vals.append(v)
        p = torch.softmax(torch.cat([s] + extra, dim=-1), dim=-1)
        out = p[..., :P] @ v1
        for i, v in enumerate(vals):
            out = out + p[..., P + i: P + i + 1] * v
        return out

    def forward(self, hid, ids, depth: int, kind: str):
        """hid: [B, T, H] target states, ids: [B, T] -> per depth the head output [B, T-1, H] (before its
        norm) at positions p = 0..T-2, which predicts x_{p+2}."""
        B, T, H = hid.shape
        P = T - 1
        e = self.rms(self.embed[ids[:, 1:]], self.norm_e)
        h_in = hid[:, :-1]
        positions = torch.arange(P).repeat(B)
        ks, vs, outs = [], [], []
        for depth_i in range(1, depth + 1):
            x = torch.cat([e, self.rms(h_in, self.norm_h)], dim=-1) @ self.fc.T
            q, k, v = (self.rms(x, self.in_norm) @ self.qkv.T).split(
                [self.hq * self.d, self.hk * self.d, self.hk * self.d], dim=-1)
            q, k = rope(q.reshape(B * P, self.hq, self.d), k.reshape(B * P, self.hk, self.d), positions, self.cos_sin)
            q = q.view(B, P, self.hq, self.d).transpose(1, 2)
            ks.append(k.view(B, P, self.hk, self.d).transpose(1, 2))
            vs.append(v.reshape(B, P, self.hk, self.d).transpose(1, 2))
            a = self.attend(q, ks, vs, depth_i).transpose(1, 2).reshape(B, P, self.hq * self.d)
            y = x + a @ self.o.T
            gu = self.rms(y, self.post_norm) @ self.gate_up.T
            gt, up = gu.chunk(2, dim=-1)
            y = y + (F.silu(gt) * up) @ self.down.T
            outs.append(y)
            fed = self.rms(y, self.norm) if kind == "post" else y  # what the drafter chains
            h_in = F.pad(fed, (0, 0, 1, 0))[:, :P]  # position p reads the output of p-1
        return outs

    def losses(self, hid, ids, depth: int, kind: str):
        T = ids.shape[1]
        outs = self.forward(hid, ids, depth, kind)
        return [F.cross_entropy(self.logits(y[:, d - 1: T - 2]).flatten(0, 1), ids[:, d + 1:].flatten())
                for d, y in enumerate(outs, start=1)]

    def tensors(self) -> dict[str, torch.Tensor]:
        """The head in the checkpoint's names (mtp.*), as the drafter loads them."""
        qd, kd = self.hq * self.d, self.hk * self.d
        q, k, v = self.qkv.detach().split([qd, kd, kd])
        gate, up = self.gate_up.detach().chunk(2)
        p = "mtp.layers.0."
        return {"mtp.fc.weight": self.fc.detach(), "mtp.norm.weight": self.norm.detach(),
                "mtp.pre_fc_norm_embedding.weight": self.norm_e.detach(),
                "mtp.pre_fc_norm_hidden.weight": self.norm_h.detach(),
                p + "input_layernorm.weight": self.in_norm.detach(),
                p + "post_attention_layernorm.weight": self.post_norm.detach(),
                p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k,
                p + "self_attn.v_proj.weight": v, p + "self_attn.o_proj.weight": self.o.detach(),
                p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
                p + "mlp.down_proj.weight": self.down.detach()}


def norm_diagnostics(llm, data) -> str:
    """pre_fc_norm_hidden(post) = (w_h * w_f) * n(pre) / rms(w_f * n(pre)), n(x) = x / rms(x): the two inputs
    differ by the final norm's weight w_f (absorbable into w_h) and a per-token scalar 1 / rms(post)."""
    w = llm.model.norm.weight.float()
    r = data[0].float().pow(2).mean(-1).sqrt().flatten()  # rms(post) = rms(w_f * n(pre)) per token
    return (f"final norm weight: mean {w.mean():.3f}, std {w.std():.3f}, range {w.min():.2f}..{w.max():.2f}; "
            f"per-token rms of the post-norm state: mean {r.mean():.3f}, std/mean {r.std() / r.mean():.4f}")


def train(llm, data, kind: str, regime: int, steps: int, batch: int, lr: float, seed: int) -> tuple[Head, list]:
    post, pre, ids = data
    hid = post if kind == "post" else pre
    head = Head(llm, seed)
    params = [p for p in head.parameters()]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    g = torch.Generator().manual_seed(seed + 1)  # the same batches, in the same order, for every head
    order, log = torch.empty(0, dtype=torch.int64), []
    for step in range(steps):
        if len(order) < batch:
            order = torch.cat([order, torch.randperm(len(ids), generator=g)])
        idx, order = order[:batch], order[batch:]
        ls = head.losses(hid[idx], ids[idx], regime, kind)
        loss = sum(ls) / len(ls)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0 or step == steps - 1:
            log.append((step, [round(x.item(), 3) for x in ls]))
    return head, log


@torch.no_grad()
def agreement(head: Head, data, greedy: torch.Tensor, kind: str, depth: int = 3) -> list[float]:
    """Held-out, teacher-forced: how often depth d's top-1 equals the target's greedy token for x_{p+2}
    (greedy[:, p+1]), over positions p = 2..T-3 (valid at every depth)."""
    post, pre, ids = data
    hid = post if kind == "post" else pre
    T = ids.shape[1]
    outs = head.forward(hid, ids, depth, kind)
    return [float((head.logits(y[:, 2: T - 2]).argmax(-1) == greedy[:, 3: T - 1]).float().mean()) for y in outs]


@torch.no_grad()
def check_against_drafter(path: str, head: Head, data, kind: str) -> float:
    """The trained module and ninfer's MTPDrafter give the same head outputs, chained steps included."""
    from ninfer.drafting import build_drafter

    llm = LLM(path, backend="reference", device="cpu", dtype="float32", max_context=512, progress=False)
    dr = build_drafter(f"mtp:3,hidden={kind}", llm)
    post, pre, ids = data
    hid, seq = (post if kind == "post" else pre)[0], ids[0].tolist()
    n = 40  # depth 1 over positions 0..n-1, then two chained steps at n and n+1
    outs = head.forward(hid[None, : n + 3], ids[0:1, : n + 3], 3, kind)
    dr.reset()
    a = dr._step(hid[:n], seq[1: n + 1], 0)
    scale = float(outs[0][0, :n].abs().max())  # the residual stream grows: compare relative to it
    errs = [float((a - outs[0][0, :n]).abs().max())]
    prev = a[-1:]
    for d in (2, 3):
        p = n + d - 2
        fed = dr.head.norm(prev) if kind == "post" else prev
        prev = dr._step(fed, [seq[p + 1]], p)
        errs.append(float((prev[0] - outs[d - 1][0, p]).abs().max()))
    del llm, dr
    gc.collect()
    return max(errs) / scale


def spec_run(path: str, spec: str | None, prompts: list[list[int]], new: int) -> tuple[list, dict]:
    llm = LLM(path, backend="reference", device="cpu", dtype="float32", max_context=512, draft=spec, progress=False)
    params = SamplingParams(temperature=0, max_tokens=new, ignore_eos=True)
    outs, tot = [], {"generated_tokens": 0, "verify_steps": 0, "drafted_tokens": 0, "accepted_tokens": 0, "prompts": 0}
    for ids in prompts:
        o = llm.generate(ids, params)
        outs.append(o.token_ids)
        tot["prompts"] += 1
        for k in ("generated_tokens", "verify_steps", "drafted_tokens", "accepted_tokens"):
            tot[k] += o.stats.get(k, 0)
    del llm
    gc.collect()
    return outs, tot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-chunks", type=int, default=128)
    ap.add_argument("--eval-chunks", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=160)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--regimes", default="1,2", help="training depths to run: 1 = first step only, 2 = + a chained step")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cross", dest="cross", action="store_false",
                    help="skip feeding each head the state it was not trained on (mtp:1)")
    ap.add_argument("--keep", default=None, help="write the checkpoints here instead of a temp dir")
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny budget")
    a = ap.parse_args()
    if a.quick:
        a.train_chunks, a.eval_chunks, a.steps, a.batch, a.prompts, a.new_tokens = 8, 4, 4, 2, 2, 12
    os.environ["NINFER_VERIFY_WIDTH"] = "max"  # verify whole chains: acceptance as the head produces it
    t_start, cpu_start = time.perf_counter(), time.process_time()
    tmp = a.keep or tempfile.mkdtemp(prefix="mtp_hidden_")
    base = os.path.join(tmp, "smollm2-f32")
    if not os.path.exists(os.path.join(base, "model.safetensors")):
        convert(default_model_path(), base)

    llm = LLM(base, backend="reference", device="cpu", dtype="float32", max_context=512, progress=False)
    tok = llm.tokenizer
    train_files, held_files = stdlib_files()
    rng = random.Random(a.seed)
    train_chunks = chunks_from(tok, train_files, a.train_chunks, a.chunk, rng)
    # held-out files: even ones give the offline agreement chunks, odd ones the prompts
    eval_chunks = chunks_from(tok, held_files[0::2], a.eval_chunks, a.chunk, rng, per_file=1)
    prompts = [c[: a.prompt_tokens] for c in chunks_from(tok, held_files[1::2], a.prompts,
                                                          a.prompt_tokens + a.new_tokens, rng, per_file=1)]
    t0 = time.process_time()
    train_data = collect_data(llm, train_chunks)
    eval_data = collect_data(llm, eval_chunks)
    with torch.no_grad():
        greedy = llm.model.logits(eval_data[0].flatten(0, 1)).argmax(-1).view(eval_data[2].shape)
        # the drafter's two inputs differ by the final norm only
        ref = rms_norm(eval_data[1], llm.model.norm.weight, llm.config.rms_norm_eps)
        assert torch.allclose(ref, eval_data[0], atol=1e-5)
    cpu_collect = time.process_time() - t0
    print(f"data: {len(train_files)} train / {len(held_files)} held-out stdlib files; {len(train_chunks)} x "
          f"{a.chunk} train tokens, {len(eval_chunks)} x {a.chunk} held-out, {len(prompts)} prompts of "
          f"{a.prompt_tokens} + {a.new_tokens}; collected in {cpu_collect:.0f} CPU-s", flush=True)
    print(norm_diagnostics(llm, eval_data), flush=True)

    results, checks = [], []
    plain, plain_stats = spec_run(base, None, prompts, a.new_tokens)
    for regime in [int(r) for r in a.regimes.split(",")]:
        for kind in ("post", "pre"):
            t0 = time.process_time()
            head, log = train(llm, train_data, kind, regime, a.steps, a.batch, a.lr, a.seed)
            cpu_train = time.process_time() - t0
            agree = agreement(head, eval_data, greedy, kind)
            path = head_dir(base, os.path.join(tmp, f"head-d{regime}-{kind}"), head.tensors())
            err = check_against_drafter(path, head, eval_data, kind)
            assert err < 1e-5, f"the trained module and MTPDrafter disagree by {err} (relative)"
            checks.append(err)
            print(f"d{regime} {kind}: trained {a.steps} steps in {cpu_train:.0f} CPU-s, loss log {log[0]} .. "
                  f"{log[-1]}; held-out agreement depth 1/2/3 {[round(x, 3) for x in agree]}; "
                  f"module vs drafter max |diff| / max |out| {err:.1e}", flush=True)
            other = "pre" if kind == "post" else "post"
            for k, fed in [(1, kind), (3, kind)] + ([(1, other)] if a.cross else []):
                spec = f"mtp:{k},hidden={fed}"
                outs, st = spec_run(path, spec, prompts, a.new_tokens)
                lossless = all(o == p for o, p in zip(outs, plain))
                results.append((regime, kind, fed, k, st, agree if fed == kind else None, lossless))
                print(f"  {spec}: accepted {st['accepted_tokens']}/{st['drafted_tokens']} = "
                      f"{st['accepted_tokens'] / max(1, st['drafted_tokens']):.3f}, "
                      f"{st['generated_tokens'] / (st['verify_steps'] + st['prompts']):.2f} tokens per target "
                      f"forward, lossless {lossless}", flush=True)
            del head
            gc.collect()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    print(f"\ncommit {commit}; {a.steps} steps x {a.batch} x {a.chunk} tokens per head (AdamW lr {a.lr}, "
          f"seed {a.seed}); plain greedy {plain_stats['generated_tokens']} tokens; "
          f"total {time.process_time() - cpu_start:.0f} CPU-s, {time.perf_counter() - t_start:.0f} s wall\n")
    print("| training | head trained on | drafter | acceptance (accepted/drafted) | tokens per target forward | "
          "held-out top-1 agreement d1 / d2 / d3 | lossless |")
    print("|---|---|---|---|---|---|---|")
    for regime, kind, fed, k, st, agree, lossless in results:
        train_desc = "step 1 only" if regime == 1 else f"steps 1..{regime} (chained)"
        print(f"| {train_desc} | {kind} | mtp:{k},hidden={fed} | "
              f"{st['accepted_tokens'] / max(1, st['drafted_tokens']):.3f} "
              f"({st['accepted_tokens']}/{st['drafted_tokens']}) | "
              f"{st['generated_tokens'] / (st['verify_steps'] + st['prompts']):.2f} | "
              f"{' / '.join(f'{x:.3f}' for x in agree) if agree else '(fed the other state)'} | "
              f"{'yes' if lossless else 'NO'} |")
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    if not all(r[-1] for r in results):
        sys.exit("speculative output differed from plain greedy")


if __name__ == "__main__":
    main()
