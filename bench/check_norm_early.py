"""Does add_rms_norm reading its weight / the settled residual before its PDL wait (fused.NORM_EARLY) change a quantised
model's logits? It must not: the reads are the same values either way. Eager and graphed decode of random models of
the GPU tests' shapes, logits compared bit for bit with NORM_EARLY=0's, several times each (a race would show as a
difference in some run)."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def greedy(runner, ids, steps=6):
    logits = [runner.prefill(ids)]
    for _ in range(steps):
        logits.append(runner.decode(int(logits[-1].argmax())))
    return torch.stack([lg.float().flatten() for lg in logits])


def main():
    import random_model as rm
    from quant import quant_model

    from ninfer.kernels import fused

    for shape, layers, bits in (("qwen3-8b", 2, 8), ("qwen3.5-27b", 4, 4)):
        torch.manual_seed(0)
        graphed, weights = quant_model(shape, layers, bits, lm_head_bits=bits)
        eager, _ = rm.build(shape, "sm90", "cuda", torch.bfloat16, 512, layers=layers, weights=weights)
        eager.graphs = None
        ids = torch.randint(0, graphed.cfg.vocab_size, (60,), generator=torch.Generator().manual_seed(3)).tolist()
        base = None
        for early in (0, 3, 1, 3, 0, 3):
            fused.NORM_EARLY = early
            for name, r in (("eager", eager), ("graphed", graphed)):
                r.reset()
                if r.graphs is not None:
                    r.graphs = type(r.graphs)(r)  # fresh captures with this setting
                out = greedy(r, ids)
                if base is None:
                    base = out
                    top = out.topk(2, dim=-1).values
                    print(f"{shape}: rows' std across steps {out.std(0).mean():.3g}, top-2 gaps "
                          f"{(top[:, 0] - top[:, 1]).tolist()}", flush=True)
                d = (out - base).abs().max().item()
                print(f"{shape} early={early} {name}: bit for bit the first run's: {torch.equal(out, base)} "
                      f"(max |diff| {d:.3g})", flush=True)
        del graphed, eager, weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
