"""Batch-1 decode and prefill speed of ninfer on random-weight models of real shapes.

For each shape and context: prefill a random prompt of CTX tokens (timed --prefill-repeats times from an empty
cache after a warm-up one: the median, min..max beside it), then greedy-decode NEW
tokens through the engine's runner (CUDA graphs on, an argmax and a host read per token, as in
generation). Reports tok/s, the bytes one decode step must read (weights but the embedding table, the
KV cache up to the context, the Gated DeltaNet states read and written) over the measured device copy
bandwidth, and prefill tok/s.

    python bench/decode.py --backend sm90 --shapes qwen3-8b,llama3-8b,qwen3.5-27b --ctx 512,8192
    python bench/decode.py --shapes qwen3.5-27b --ctx 512 --pdl 0,1,0,1   # PDL off/on A/B on the same weights
    python bench/decode.py --shapes qwen3.5-27b --ctx 512 --norm 2,1,2,1  # two-pass / one-pass RMSNorm A/B
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_model as rm  # noqa: E402
from timing import decode_rates  # noqa: E402


def copy_bandwidth(nbytes: int = 2 * 1024**3) -> float:
    """Device-to-device copy, bytes read + written per second (median of 10, events)."""
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    y = torch.empty_like(x)
    times = []
    for i in range(13):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        if i >= 3:
            times.append(a.elapsed_time(b) / 1e3)
    del x, y
    return 2 * nbytes / sorted(times)[len(times) // 2]


def matmul_rate(n: int = 8192) -> float:
    """bf16 dense matmul FLOP/s on random data (n x n x n, median of 10, events): the prefill ceiling."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    times = []
    for i in range(13):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        a @ b
        e1.record()
        e1.synchronize()
        if i >= 3:
            times.append(e0.elapsed_time(e1) / 1e3)
    return 2 * n ** 3 / sorted(times)[len(times) // 2]


def prefill_flops(runner, weights: dict, ctx: int) -> float:
    """Matrix FLOPs of a prefill of ctx tokens: 2 per weight per token (every weight but the embedding
    table and lm_head, which runs for the last token only), plus causal attention (QK^T and PV over
    half the square). The Gated DeltaNet's chunked recurrence is not counted."""
    cfg = runner.cfg
    params = sum(t.numel() for p, t in weights.items() if p not in ("embed_tokens", "lm_head.weight"))
    attn = len(cfg.attention_layers) * 2 * ctx * ctx * cfg.num_heads * cfg.head_dim
    return 2.0 * params * ctx + attn


def step_bytes(runner, weights: dict, ctx: int) -> int:
    """Bytes one decode step at context ctx must move at least."""
    cfg = runner.cfg
    esize = torch.empty((), dtype=runner.dtype).element_size()
    kv = len(cfg.attention_layers) * ctx * cfg.num_kv_heads * cfg.head_dim * 2 * esize
    state = 0
    if runner.state is not None:
        s = runner.state
        state = 2 * s.num_layers * 4 * (s.heads * s.k_dim * s.v_dim + s.conv_dim * (s.kernel - 1))
    return rm.weight_bytes(weights) + kv + state


def run_shape(shape: str, backend: str, ctx: int, new: int, bw: float, layers: int | None,
              flops: float = 0.0, weights: dict | None = None, prefill_repeats: int = 5,
              capacity: int | None = None) -> dict:
    dtype = torch.bfloat16
    cap = max(capacity or 0, ctx + new + 64)  # the block table's length (a server's --max-context)
    runner, weights = rm.build(shape, backend, "cuda", dtype, cap, layers=layers, weights=weights)
    vocab = runner.cfg.vocab_size
    served = runner.model.ops.explain()
    print(f"  ops of {shape}: " + ", ".join(f"{op}={impl}" for op, impl in served.items()), flush=True)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (ctx,), generator=g).tolist()
    argmax = runner.model.ops.argmax
    # warm-up at the timed shapes: kernel compiles, cuBLAS/cuDNN plans, the decode graph capture
    tok = int(argmax(runner.prefill(prompt)[None])[0])
    for _ in range(3):
        tok = int(argmax(runner.decode(tok)[None])[0])
    times = []  # the prefill, timed `prefill_repeats` times from an empty cache: the median is reported
    for _ in range(max(1, prefill_repeats)):
        runner.reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = runner.prefill(prompt)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t_prefill = statistics.median(times)
    tok = int(argmax(logits[None])[0])
    t0 = time.perf_counter()
    for _ in range(new):
        tok = int(argmax(runner.decode(tok)[None])[0])
    t_decode = time.perf_counter() - t0
    plain_tok_s = new / t_decode
    tok_s, gpu_tok_s = decode_rates(runner, prompt, new)  # the engine's pipelined loop; the graph back to back
    nbytes = step_bytes(runner, weights, ctx + new // 2)
    row = {"shape": shape, "layers": runner.cfg.num_layers, "backend": backend, "ctx": ctx, "capacity": cap, "new": new,
           "prefill_tok_s": ctx / t_prefill, "prefill_tok_s_min": ctx / max(times), "prefill_tok_s_max": ctx / min(times),
           "prefill_repeats": len(times), "decode_tok_s": tok_s, "step_GB": nbytes / 1e9,
           "decode_gpu_tok_s": gpu_tok_s, "decode_plain_tok_s": plain_tok_s,
           "host_gap_us": (1 / plain_tok_s - 1 / gpu_tok_s) * 1e6 if gpu_tok_s else None,
           "bw_fraction": nbytes * tok_s / bw,
           "prefill_flop_fraction": prefill_flops(runner, weights, ctx) / t_prefill / flops if flops else None, "graph_replays": runner.graphs.replays if runner.graphs else 0}
    del runner, weights
    gc.collect()  # the runner and its CudaGraphs refer to each other: free the model before the next one is built
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shapes", default="llama3-8b,qwen3-8b,qwen3.5-27b")
    ap.add_argument("--ctx", default="512,8192")
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--layers", type=int, default=None, help="fewer layers, for a quick look")
    ap.add_argument("--capacity", type=int, default=None, help="the KV block table's length in tokens (a server's "
                    "max context; ninfer's default on a GPU is 32768); default: just what the row needs")
    ap.add_argument("--prefill-repeats", type=int, default=5, help="timed prefills per row (after a warm-up one); "
                    "prefill tok/s is their median, min..max beside it")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--gemv", default=None, help="A/B in one process on the same weights: a comma list of "
                    "ninfer.kernels.gemv.MODE values run in turn per shape, e.g. simt,mma,simt,mma")
    ap.add_argument("--pdl", default=None, help="A/B in one process on the same weights: a comma list of 0/1/early "
                    "(programmatic dependent launch off/on, ninfer.kernels.launch.PDL; early: on, with the kernels "
                    "compiled with NINFER_PDL_EARLY_TRIGGER, short ones letting the next launch before they wait)")
    ap.add_argument("--norm", default=None, help="A/B in one process on the same weights: a comma list of 1/2 "
                    "(the RMSNorm kernels holding the row in registers / the former two-pass ones, compiled with "
                    "NINFER_NORM_TWO_PASS: ninfer/common.cuh)")
    ap.add_argument("--fused", default=None, help="A/B in one process on the same weights: NINFER_FUSED values "
                    "separated by '/', e.g. '1/add_rms_norm,rope_write_kv,linear_silu_mul' (every fused op / the "
                    "three before the Gated DeltaNet fusions); ops are resolved again for each")
    ap.add_argument("--opts", default=None, help="A/B in one process on the same weights: extra compile options of "
                    "the backend's kernels separated by '/', e.g. '/-DNINFER_GEMV_SPLIT_TAIL_LOOP "
                    "-DNINFER_GEMV_SPLIT_UNROLL=4' (as built / the split-K GEMV before its predicated rounds)")
    ap.add_argument("--splitk", default=None, help="A/B: rules of the one-token GEMV's K split "
                    "(NINFER_GEMV_SPLITK, kernels/gemv.py: split_k), comma list, e.g. '1,4'")
    ap.add_argument("--pairs", default=None, help="A/B: NINFER_GEMV_PAIRS values (kernels/gemv.py: form, two rows a "
                    "warp), comma list, e.g. '1,0,1,0'; a value 'a:b' also sets NINFER_GEMV_SILU2=b (kernels/fused.py: "
                    "gate and up rows on two warps), e.g. '1:1,0:0,1:0'")
    a = ap.parse_args()
    bw = copy_bandwidth()
    flops = matmul_rate()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s  bf16 matmul {flops / 1e12:.0f} "
          f"TFLOP/s  torch {torch.__version__}", flush=True)
    rows = []
    from ninfer.backends import installed_backends
    from ninfer.kernels import gemv, launch

    lib = installed_backends()[a.backend].kernels
    base_options = lib.options

    def set_pdl(p: str, norm: str = "1", extra: str = ""):
        launch.PDL = p != "0"
        opts = base_options + (("-DNINFER_PDL_EARLY_TRIGGER",) if p == "early" else ()) \
            + (("-DNINFER_NORM_TWO_PASS",) if norm == "2" else ()) + tuple(extra.split())
        lib.set_options(opts)

    for shape in a.shapes.split(","):
        weights = None
        if a.gemv or a.pdl or a.norm or a.fused or a.opts or a.splitk or a.pairs:  # one set of random weights for every mode
            runner, weights = rm.build(shape, a.backend, "cuda", torch.bfloat16, 64, layers=a.layers)
            del runner
        pdls = [p.strip() for p in a.pdl.split(",")] if a.pdl else ["1" if launch.PDL else "0"]
        norms = [n.strip() for n in a.norm.split(",")] if a.norm else ["1"]
        fuseds = a.fused.split("/") if a.fused else [os.environ.get("NINFER_FUSED", "1")]
        splits = a.splitk.split(",") if a.splitk else [os.environ.get("NINFER_GEMV_SPLITK", "1")]
        pairs = a.pairs.split(",") if a.pairs else [os.environ.get("NINFER_GEMV_PAIRS", "")]
        for ctx, mode, pdl, norm, fused, opt, sk, pr in ((int(c), m, p, n, f, o, k, q) for c in a.ctx.split(",")
                                                         for m in (a.gemv or gemv.MODE).split(",") for p in pdls
                                                         for n in norms for f in fuseds
                                                         for o in (a.opts.split("/") if a.opts else [""])
                                                         for k in splits for q in pairs):
            try:
                gemv.MODE = mode
                os.environ["NINFER_GEMV_SPLITK"] = sk  # read at each launch (captured once per width)
                os.environ["NINFER_GEMV_PAIRS"], _, silu2 = pr.partition(":")
                os.environ["NINFER_GEMV_SILU2"] = silu2  # read at each launch (captured per width)
                set_pdl(pdl, norm, opt)
                os.environ["NINFER_FUSED"] = fused  # read when the ops are resolved (rm.build)
                rows.append(run_shape(shape, a.backend, ctx, a.new, bw, a.layers, flops, weights, a.prefill_repeats,
                                      a.capacity))
                r = rows[-1]
                r["gemv"], r["pdl"], r["norm"], r["fused"], r["opts"], r["splitk"] = mode, pdl, norm, fused, opt, sk
                r["pairs"] = pr
                print(f"RESULT {shape:12s} ctx={ctx:5d} {a.backend} gemv={mode} splitk={sk} pairs={pr or '-'} "
                      f"pdl={pdl:5s} norm={norm} "
                      f"fused={fused} opts='{opt}': decode "
                      f"{r['decode_tok_s']:7.1f} tok/s "
                      f"({r['bw_fraction']:.3f} of copy bw, {r['step_GB']:.2f} GB/step)  "
                      + f"[plain loop {r['decode_plain_tok_s']:.1f} tok/s"
                      + (f", graph replays back to back {r['decode_gpu_tok_s']:.1f} tok/s (the plain loop's host gap "
                         f"{r['host_gap_us']:.0f} us a step)" if r["decode_gpu_tok_s"] else "") + "]  "
                      + f"prefill {r['prefill_tok_s']:8.0f} tok/s median of {r['prefill_repeats']} "
                      f"({r['prefill_tok_s_min']:.0f}..{r['prefill_tok_s_max']:.0f}; "
                      f"{r['prefill_flop_fraction']:.2f} of bf16 matmul)",
                      flush=True)
            except Exception as e:  # one shape failing must not hide the others
                print(f"FAILED {shape} ctx={ctx} gemv={mode} pdl={pdl} norm={norm}: {type(e).__name__}: "
                      f"{str(e)[:400]}", flush=True)
                torch.cuda.empty_cache()
        del weights
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "matmul_flops": flops, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
