"""Temporary: clear greedy leads of the GPU model tests' random models by torch seed (plain settings)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    import random_model as rm
    from quant import quant_model

    from ninfer.quant import gpu

    for shape, layers, bits, seed_ids in (("qwen3.5-27b", 4, 4, 7), ("qwen3-8b", 2, 8, 3)):
        for seed in range(8):
            torch.manual_seed(seed)
            _, weights = quant_model(shape, layers, bits, lm_head_bits=bits)
            eager, _ = rm.build(shape, "sm90", "cuda", torch.bfloat16, 512, layers=layers, weights=weights)
            eager.graphs = None
            gpu.QMV1F = False
            ids = torch.randint(0, eager.cfg.vocab_size, (60,),
                                generator=torch.Generator().manual_seed(seed_ids)).tolist()
            lg = [eager.prefill(ids)]
            for _ in range(6):
                lg.append(eager.decode(int(lg[-1].argmax())))
            out = torch.stack([x.float().flatten() for x in lg])
            top = out.topk(2, dim=-1).values
            clear = ((top[:, 0] - top[:, 1]) > 2 ** -6 * top[:, 0].abs()).sum().item()
            print(f"{shape} seed {seed}: clear {clear} of 7, rows' std {out.std(0).mean():.3g}, "
                  f"min rel gap {((top[:, 0] - top[:, 1]) / top[:, 0].abs()).min():.3g}", flush=True)
            gpu.QMV1F = True
            del eager, weights
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
