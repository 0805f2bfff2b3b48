"""Cost of verifying k drafted tokens in one target forward, against decoding one token.

Speculative decoding pays off when the verify forward over [last token + k drafts] costs little more
than a one-token decode (batch-1 decode is memory-bound: the weights are read once either way). For
each width k this prefills a random prompt of CTX tokens, then repeats: verify k tokens through the
engine's runner (CUDA graphs where the runner has them), roll the KV cache / recurrent state back
with ``truncate``, and times it with CUDA events. It prints the median milliseconds, the ratio to
k = 1, and the break-even: the mean accepted tokens per step a drafter must reach for width k to
beat plain decoding. These numbers decide the default verify widths.

    python bench/verify_cost.py --shapes qwen3.5-27b --widths 1,4,8,16 --ctx 1024 --json $OUT/verify.json
    python bench/verify_cost.py --device cpu --shapes qwen3-8b --layers 2 --reps 3 --ctx 64   # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_model as rm  # noqa: E402


class Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.a.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.b.record()
            self.b.synchronize()
            self.ms = self.a.elapsed_time(self.b)
        else:
            self.ms = (time.perf_counter() - self.t0) * 1e3


def measure(runner, widths: list[int], ctx: int, reps: int, warmup: int, seed: int) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    vocab = runner.cfg.vocab_size
    prompt = torch.randint(0, vocab, (ctx,), generator=gen).tolist()
    runner.prefill(prompt)
    base = len(runner.tokens)
    rows = []
    for k in widths:
        times = []
        for i in range(warmup + reps):
            toks = torch.randint(0, vocab, (k,), generator=gen).tolist()
            with Timer(runner.device) as t:
                logits = runner.verify(toks)  # [k, V]
                logits.argmax(dim=-1).tolist()  # the host read acceptance needs
            runner.truncate(base)  # reject everything: back to the prompt, no recomputation
            if i >= warmup:
                times.append(t.ms)
        rows.append({"width": k, "ms": statistics.median(times), "min_ms": min(times)})
    one = rows[0]["ms"] if rows[0]["width"] == 1 else None
    for r in rows:
        r["ratio_to_1"] = r["ms"] / one if one else None
        # a verify of width k emits (accepted + 1) tokens; plain decoding emits 1 per `one` ms
        r["break_even_accepted"] = (r["ms"] / one - 1) if one else None
    return rows


class _IdsTokenizer:
    """Just enough tokenizer for the generation loop on a random model: ids as text."""

    eos_token_ids: set = set()

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(str(i) for i in ids)


def lossless_check(runner, n_new: int = 48) -> dict:
    """Greedy speculative output equals plain greedy output on this device (CUDA graphs, KV and
    recurrent-state rollback included): an oracle drafter proposes the plain output's next 5 tokens with
    the 4th one wrong, so every step accepts 3 and rolls back 2; lookup runs as it would for a user."""
    from ninfer.config.sampling import SamplingParams
    from ninfer.drafting import Drafter
    from ninfer.engine.generate import generate_stream

    try:
        from ninfer_drafters.lookup import LookupDrafter
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "drafters", "src"))
        from ninfer_drafters.lookup import LookupDrafter

    gen = torch.Generator().manual_seed(1)
    pattern = torch.randint(0, runner.cfg.vocab_size, (24,), generator=gen).tolist()
    prompt = pattern * 3
    params = SamplingParams(temperature=0, max_tokens=n_new, ignore_eos=True)

    def run(drafter):
        ids, stats = [], None
        for c in generate_stream(runner, _IdsTokenizer(), prompt, params, set(), drafter=drafter):
            ids += c.token_ids
            stats = c.stats or stats
        return ids, stats

    plain, _ = run(None)

    class SpoiledOracle(Drafter):
        name = "spoiled-oracle"

        def propose(self, context):
            done = len(context.token_ids) - len(prompt)
            chain = plain[done: done + 5][: context.max_tokens]
            if len(chain) > 3:
                chain[3] = (chain[3] + 1) % runner.cfg.vocab_size
            return chain

    out = {}
    for name, drafter in (("oracle", SpoiledOracle()), ("lookup", LookupDrafter(arg="15", min="1"))):
        ids, st = run(drafter)
        out[name] = {"equal": ids == plain, "tokens_per_step": st["generated_tokens"] / (st["verify_steps"] + 1),
                     "accepted": st["accepted_tokens"], "drafted": st["drafted_tokens"]}
    return out


def chosen_chains(seconds: dict[int, float], room: int) -> dict[float, int]:
    """The drafted-chain length the runtime width policy would pick on these measured costs, for a
    drafter whose every position is accepted with probability a (its converged estimates)."""
    from ninfer.engine.width import Acceptance, VerifyCost, WidthPolicy

    cost = VerifyCost()
    for w, s in seconds.items():
        cost.record(w, s)  # the first record of a width is dropped as a warm-up
        cost.record(w, s)
    picks = {}
    for a in (0.3, 0.5, 0.7, 0.8, 0.9, 0.95):
        acc = Acceptance()
        acc.accepted, acc.tried = [a * 1e6] * room, [1e6] * room
        picks[a] = WidthPolicy(cost, acc, mode="adaptive").choose(room)
    return picks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="qwen3.5-27b")
    ap.add_argument("--widths", default="1,4,8,16")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", type=int, default=None, help="fewer layers (smoke tests)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--no-check", action="store_true", help="skip the greedy lossless check")
    a = ap.parse_args()
    from ninfer.backends import choose_backend

    device = torch.device(a.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    backend, why = choose_backend(a.backend, device)
    widths = [int(w) for w in a.widths.split(",")]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    out = {"device": gpu, "backend": backend, "ctx": a.ctx, "dtype": str(dtype), "results": {}}
    print(f"{gpu}, backend {backend} ({why}), ctx {a.ctx}, {dtype}")
    for shape in a.shapes.split(","):
        try:
            runner, weights = rm.build(shape, backend, device, dtype, a.ctx + max(widths) + 64, layers=a.layers)
            graphs = getattr(runner, "graphs", None) is not None
            print(f"\n{shape} ({rm.weight_bytes(weights) / 1e9:.1f} GB of weights read per step, "
                  f"CUDA graphs {'on' if graphs else 'off'})")
            print(f"{'width':>5} {'ms':>9} {'x width 1':>10} {'break-even accepted/step':>25}")
            rows = measure(runner, widths, a.ctx, a.reps, a.warmup, seed=0)
        except Exception as e:  # one device call measures every shape: report and go on
            import traceback

            traceback.print_exc()
            out["results"][shape] = {"error": f"{type(e).__name__}: {e}"}
            continue
        for r in rows:
            ratio = f"{r['ratio_to_1']:.2f}" if r["ratio_to_1"] is not None else "-"
            be = f"{r['break_even_accepted']:.2f}" if r["break_even_accepted"] is not None else "-"
            print(f"{r['width']:>5} {r['ms']:>9.3f} {ratio:>10} {be:>25}")
        out["results"][shape] = rows
        chosen = chosen_chains({r["width"]: r["ms"] / 1e3 for r in rows}, max(widths) - 1)
        print("chain the width policy (ninfer.engine.width) picks on these costs, by per-token acceptance: "
              + ", ".join(f"{a:.1f} -> {d}" for a, d in chosen.items()))
        out.setdefault("policy", {})[shape] = chosen
        if not a.no_check:
            try:
                check = lossless_check(runner)
            except Exception as e:
                import traceback

                traceback.print_exc()
                check = {"error": f"{type(e).__name__}: {e}"}
            print(f"lossless check (greedy speculative == plain): {check}")
            out.setdefault("lossless", {})[shape] = check
        del runner, weights
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
