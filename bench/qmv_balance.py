"""Do the one-token int4 GEMVs of 320 tiles (the 27B's down, attention o and GDN out projections: 5120 rows) lose to
uneven blocks an SM? At one wave, 320 tiles over 132 SMs put 3 blocks on 56 SMs and 2 on the others. This times
main's quant_linear in the forms those projections take (qmv1x, down: the fixed-point form made per burst from the
bf16 row; qmv1f, o: the row's form attached) on weights of 264, 320 and 396 tiles (2, 2.42 and 3 a 132-SM GPU) at the
27B's two K (17408, 6144): with no penalty for uneven blocks the time grows with the tiles; with one, 320 tiles take
about as long as 396. (Sessions 24 and 32 ran it on an H100 with cluster forms beside, a tile's warps in 2 blocks of
half as many: no penalty for uneven blocks, the clusters slower; bench/RESULTS.md; session 32's in commit 9d7a496.)

    python bench/qmv_balance.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))


def main():
    from decode import copy_bandwidth
    from qmv_i8 import timed
    from quant import random_quant

    from ninfer.quant import fixed, gpu

    bw = copy_bandwidth()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"GPU: {torch.cuda.get_device_name()}, {sms} SMs, copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    print("| K | rows (tiles, a SM) | kernel | us | of copy bw | us a tile-row of SMs |")
    print("|---:|---|---|---:|---:|---:|")
    torch.manual_seed(0)
    for k in (17408, 6144):
        for per_sm in (2, 320 / 132, 3):
            n = round(per_sm * 132) * 16
            copies = max(2, -(-300 * 2**20 // (n * k // 2)))
            ws_ = [gpu.prepare(random_quant(n, k, 4, 128, device="cuda")) for _ in range(copies)]
            nbytes = ws_[0].qweight.numel() + gpu.tile_params(ws_[0])[0].numel() * 4
            x = (torch.randn(1, k, device="cuda") * 0.5).to(torch.bfloat16)
            xf = fixed.attach(x.clone(), *fixed.fixed_point(x.flatten()))
            for name, xx in (("qmv1x (down's form)", x), ("qmv1f (o's form)", xf)):
                t = timed(lambda i, ws_=ws_, xx=xx: gpu.quant_linear(xx, ws_[i]), copies, 20)
                print(f"| {k} | {n} ({n // 16}, {n / 16 / sms:.2f}) | {name} | {t:.1f} | "
                      f"{nbytes / (t * 1e-6) / bw:.3f} | {t / (n / 16 / sms):.2f} |", flush=True)
            del ws_


if __name__ == "__main__":
    main()
