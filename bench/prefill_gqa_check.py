"""Which form a later prefill chunk's SDPA takes on this GPU (prefill_sdpa: enable_gqa where torch's flash kernel
serves it, else K and V repeated to the query heads), its time against the repeated form, and that both give the
same output. Llama-3-8B (32 q / 8 kv heads of 128) and Qwen3.5-27B (24 / 4 of 256) shapes, bf16, the last 2048-token
chunk of an L-token prompt, eager, median of 10 (CUDA events).

    python bench/prefill_gqa_check.py
"""

from __future__ import annotations

import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from timing import event_median_s  # noqa: E402

from ninfer.kernels import attention as att  # noqa: E402


def main():
    T, bs = 2048, 64
    for Hq, Hk, D in ((32, 8, 128), (24, 4, 256)):
        for L in (8192, 32768):
            g = torch.Generator(device="cuda").manual_seed(L + D)
            kc = torch.randn(L // bs + 8, bs, Hk, D, device="cuda", generator=g).to(torch.bfloat16)
            vc = torch.randn(kc.shape, device="cuda", generator=g).to(torch.bfloat16)
            bt = torch.randperm(kc.shape[0], device="cuda")[: L // bs].to(torch.int32)
            q = torch.randn(T, Hq, D, device="cuda", generator=g).to(torch.bfloat16)
            pos = torch.arange(L - T, L, device="cuda")
            k = kc[bt.long()].reshape(-1, Hk, D)[:L].transpose(0, 1)
            flash = att._flash_gqa(q.transpose(0, 1), k, k)
            out, ms = {}, {}
            for form in ("default", "repeat"):
                if form == "repeat":
                    os.environ["NINFER_PREFILL_GQA"] = "repeat"
                run = functools.partial(att.prefill_sdpa, q, kc, vc, bt, pos, D ** -0.5)
                out[form] = run()
                for _ in range(3):
                    run()
                ms[form] = event_median_s(run, 10) * 1e3
                os.environ.pop("NINFER_PREFILL_GQA", None)
            diff = (out["default"].float() - out["repeat"].float()).abs().max().item()
            print(f"{Hq}/{Hk} x {D}, L {L}: flash with enable_gqa: {flash}; default {ms['default']:.2f} ms, repeated "
                  f"{ms['repeat']:.2f} ms; max |difference| {diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
