"""int4 g128 weight quantisation methods on the real SmolLM2-135M: perplexity and KL divergence.

    python bench/int4_accuracy.py [METHOD ...]      (no METHOD: all of them)

Evaluation: the first 1024 tokens of tests/data/declaration_of_independence.txt (what
tests/test_quant_accuracy.py measures); per method the perplexity, its change against the fp32 model, and
the mean per-token KL(fp32 || quantised) of the next-token distributions (a closeness measure that blurring
cannot improve, unlike perplexity on a text the model is over-confident on). Calibration (methods that use
activations): tests/data/alice_in_wonderland_ch1-2.txt, never the evaluation text. Statistics are cached
under $NINFER_BENCH_CACHE (default /tmp/ninfer_int4_cache). CPU, float32, the reference backend.
``round`` (block-wise learned rounding) takes its options from ROUND_KW, e.g.
ROUND_KW='{"iters": 10, "windows": 8, "batch": 2, "lr": 0.02}' (an "e2e_calibration" given as a text file's
path); ``clip+tune sym|asym`` (clip, then group scales and norm weights tuned end to end,
``ninfer.quant.tune``) takes TUNE_KW, e.g. TUNE_KW='{"steps": 15}' (its held-out windows follow its training
windows in CALIB: with Alice they overlap the "held out" column, so pass CALIB=tests/data/calibration_mixed.txt);
SAVE=PREFIX writes each method's weights to PREFIX.METHOD.pt. ``e2e`` runs the end-to-end stage alone
(``ninfer.quant.blockwise.e2e_tune``, options from E2E_KW) on the weights of a file SAVE wrote, E2E_FROM=FILE,
calibrated on CALIB (its first E2E_KW "windows" windows of 256 tokens train it, the "holdout" after them judge it;
raise CALIB_TOKENS to reach them). CALIB=FILE: another calibration text (default Alice ch. I-II). WINDOW=N: calibration windows of N tokens (default
2048); SINK_WEIGHT=W: each window's first token (the attention sink) counts W times in the Hessians. Besides the Declaration,
every method is also measured on Alice tokens 4096-5120 ("held out": outside Alice 0-4096 and outside
tests/data/calibration_mixed.txt, whose Alice part is tokens 0-~2000).
"""

from __future__ import annotations

import math
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL = os.path.join(ROOT, "tests", "data", "declaration_of_independence.txt")
ALICE = os.path.join(ROOT, "tests", "data", "alice_in_wonderland_ch1-2.txt")
CALIB = os.environ.get("CALIB", ALICE)  # a text file; relative paths from the repository root
HELD_OUT = slice(4096, 5120)  # Alice tokens outside every calibration set used here
CACHE = os.environ.get("NINFER_BENCH_CACHE", "/tmp/ninfer_int4_cache")


def main(argv: list[str]) -> None:
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    from ninfer.llm import LLM
    from ninfer.quant import methods as M
    from ninfer.quant.evaluate import _swapped
    from ninfer.quant.layout import dequantize
    from ninfer.quant.perplexity import log_probabilities

    calib_tokens = int(os.environ.get("CALIB_TOKENS", "8192"))
    llm = LLM(max_context=2048, progress=False)
    with open(EVAL, encoding="utf-8") as f:
        ids = llm.tokenizer.encode(f.read())[:1024]
    with open(os.path.join(ROOT, CALIB), encoding="utf-8") as f:
        calib = llm.tokenizer.encode(f.read())[:calib_tokens]
    with open(ALICE, encoding="utf-8") as f:
        held = llm.tokenizer.encode(f.read())[HELD_OUT]

    def logprobs(tokens=ids):
        return log_probabilities(llm, tokens)

    base, base_h = logprobs(), logprobs(held)
    tgt, tgt_h = torch.tensor(ids[1:]), torch.tensor(held[1:])
    base_nll = -base.gather(1, tgt[:, None]).mean().item()
    base_nll_h = -base_h.gather(1, tgt_h[:, None]).mean().item()
    print(f"baseline ppl {math.exp(base_nll):.4f} ({len(ids)} eval tokens, {len(calib)} calibration tokens from "
          f"{CALIB}); held-out Alice {math.exp(base_nll_h):.4f}")

    def measure(new) -> tuple[float, float, float, float]:
        def dense(q):
            if isinstance(q, torch.Tensor):  # a norm weight (folded scales)
                return q
            w = dequantize(q, torch.float32)
            return w if q.perm is None else w[:, torch.argsort(q.perm)]
        dense = [(obj, dense(q)) for obj, q in new]
        with _swapped(llm, dense):
            lp, lp_h = logprobs(), logprobs(held)
        nll = -lp.gather(1, tgt[:, None]).mean().item()
        kl = (base.exp() * (base - lp)).sum(-1).mean().item()
        nll_h = -lp_h.gather(1, tgt_h[:, None]).mean().item()
        kl_h = (base_h.exp() * (base_h - lp_h)).sum(-1).mean().item()
        return math.exp(nll), kl, math.exp(nll_h - base_nll_h) - 1, kl_h

    os.makedirs(CACHE, exist_ok=True)
    window = int(os.environ.get("WINDOW", "2048"))  # calibration windows, each from an empty cache
    sink = float(os.environ.get("SINK_WEIGHT", "1"))  # each window's first token counted this many times in H
    stats = M.CalibrationCache(os.path.join(CACHE, f"calib_{len(calib)}_w{window}" + (f"_sink{sink:g}" if sink != 1
                                                                                      else "") + ".pt"), window, sink)
    names = argv or list(M.BENCH_METHODS)
    print(f"{'method':44s} {'ppl':>9s} {'vs fp32':>9s} {'KL':>8s} {'held':>8s} {'KL held':>8s} {'time s':>7s}")
    for name in names:
        t0 = time.time()
        new = M.BENCH_METHODS[name](llm, calib, stats)
        dt = time.time() - t0
        if os.environ.get("SAVE"):  # the quantised weights by parameter path, for later analysis
            paths = {id(lin): path for path, lin in M.decoder_linears(llm)}
            torch.save({paths[id(obj)]: q for obj, q in new if id(obj) in paths}, os.environ["SAVE"] + f".{name}.pt")
        ppl, kl, held_rel, kl_h = measure(new)
        print(f"{name:44s} {ppl:9.4f} {100 * (ppl / math.exp(base_nll) - 1):+8.2f}% {kl:8.4f} {100 * held_rel:+7.2f}% "
              f"{kl_h:8.4f} {dt:7.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
