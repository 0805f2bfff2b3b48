"""Decode-speed of grouped-int weights on the GPU: every Linear of a 27B-shaped model in int4 (W4A16,
group 128) and of an 8B-shaped model in int8 (W8A16, group 128), batch 1, replayed from a CUDA graph.

Prints per model: weight bytes, time per token for all the model's GEMVs (attention, norms and lm_head
excluded, so it is the GEMV ceiling of decode tok/s), achieved bandwidth and its fraction of the
card's peak, and the same model in bf16 through cuBLAS in the same process as the peer.
Usage: python bench/quant.py [--peak-gbs 4800] [--layers N]
"""

from __future__ import annotations

import argparse
import time

import torch

SHAPES = {  # name: (bits, hidden, q_out, kv_out, intermediate, layers)
    "27B-shaped W4A16 g128": (4, 5120, 6144, 1024, 17408, 64),
    "8B-shaped W8A16 g128": (8, 4096, 4096, 1024, 14336, 32),
}


def random_quant(n: int, k: int, bits: int, group: int = 128):
    from ninfer.quant.layout import QuantWeight

    per_byte = 8 // bits
    q = torch.randint(0, 256, (n, k // per_byte), dtype=torch.uint8, device="cuda")
    s = (torch.rand(n, k // group, device="cuda") * 0.01).half()
    return QuantWeight(q, s, bits, group, k)


def layer_shapes(hidden, q_out, kv_out, inter):
    return [(q_out + 2 * kv_out, hidden), (hidden, q_out), (2 * inter, hidden), (hidden, inter)]  # qkv, o, gate_up, down


def time_graph(fn, iters=50) -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm up: compiles kernels, caches float scales
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        g.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / iters


def bench_model(name, bits, hidden, q_out, kv_out, inter, layers, peak_gbs):
    from ninfer.quant.gpu import quant_linear

    shapes = layer_shapes(hidden, q_out, kv_out, inter) * layers
    ws = [random_quant(n, k, bits) for n, k in shapes]
    x = {k: torch.randn(1, k, device="cuda", dtype=torch.bfloat16) for _, k in shapes}
    qbytes = sum(w.qweight.numel() + w.scales.numel() * 8 for w in ws)  # codes + float32 scale and offset read
    tq = time_graph(lambda: [quant_linear(x[w.in_features], w) for w in ws])
    ws.clear()
    torch.cuda.empty_cache()
    dense = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for n, k in shapes]
    dbytes = sum(d.numel() * 2 for d in dense)
    td = time_graph(lambda: [torch.nn.functional.linear(x[d.shape[1]], d) for d in dense])
    dense.clear()
    torch.cuda.empty_cache()
    for label, sec, nbytes in ((f"{name} (ninfer qgemv)", tq, qbytes), (f"{name[:10]} bf16 (cuBLAS peer)", td, dbytes)):
        gbs = nbytes / sec / 1e9
        print(f"| {label:34s} | {nbytes / 1e9:7.2f} | {sec * 1e3:8.3f} | {1 / sec:8.1f} | {gbs:7.0f} | {gbs / peak_gbs:6.1%} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peak-gbs", type=float, default=4800.0, help="the card's memory bandwidth (H200: 4800)")
    ap.add_argument("--layers", type=int, default=None, help="override the layer count (smaller cards)")
    args = ap.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| model | weights GB | ms/token (GEMVs) | tok/s ceiling | GB/s | of peak |")
    print("|---|---|---|---|---|---|")
    for name, (bits, h, qo, kvo, inter, layers) in SHAPES.items():
        bench_model(name, bits, h, qo, kvo, inter, args.layers or layers, args.peak_gbs)


if __name__ == "__main__":
    main()
