"""Gated DeltaNet decode/verify kernels against the reference torch ops, at the Qwen3.5-27B shapes.

For each backend that runs here, each op (conv1d update, gated delta rule, its verify form, the gated
output norm) at decode (T=1) and verify (T=16) widths: the median time per call over CUDA-event-timed
repeats of a CUDA graph holding CALLS calls (as the engine runs them: no Python in the timing), for
the backend's kernel and for the reference op, and the kernel's bytes moved per second as a fraction
of the measured device copy bandwidth. One more row times prefill's gdn_chunked over 2048 tokens (the
backend serves it with the token-by-token kernel) against the reference's chunked form.

    python bench/gdn_kernels.py [--backend sm90] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode import copy_bandwidth  # noqa: E402

HK, H, D, K = 16, 48, 128, 4  # Qwen3.5-27B linear attention
QK, VW = HK * D, H * D
C = 2 * QK + VW  # conv channels
CALLS, REPS = 20, 15


def graph_time(fn) -> float:
    """Seconds per call: median over REPS replays of a graph of CALLS calls (eager if capture fails)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # compile, load, warm allocator
    torch.cuda.current_stream().wait_stream(side)
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS):
                fn()
        run = graph.replay
    except Exception:  # an op that cannot be captured is timed eagerly (host time included)
        torch.cuda.synchronize()

        def run():
            for _ in range(CALLS):
                fn()
    run()
    times = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / CALLS)
    return sorted(times)[len(times) // 2]


def cases(dtype: torch.dtype):
    """(kernel op, reference op, T, args builder, bytes moved) for each op and width."""
    es = torch.empty((), dtype=dtype).element_size()
    state = H * D * D * 4

    def conv_args(T):
        mixed = torch.randn(T, C + VW, device="cuda").to(dtype)
        return (mixed[:, :C], torch.randn(C, K, device="cuda").to(dtype), None,
                torch.randn(C, K - 1, device="cuda"))

    def gdn_args(T):
        y = torch.randn(T, C, device="cuda").to(dtype)
        q, k, v = y.split([QK, QK, VW], dim=-1)
        ba = torch.randn(T, 2 * H, device="cuda").to(dtype)
        g = -F.softplus(ba[:, H:].float())
        return (q.reshape(T, HK, D), k.reshape(T, HK, D), v.reshape(T, H, D), g, torch.sigmoid(ba[:, :H]),
                torch.randn(H, D, D, device="cuda") * 0.5)

    def norm_args(T):
        z = torch.randn(T, C + VW, device="cuda").to(dtype)[:, C:].reshape(T, H, D)
        o = torch.randn(T, H, D, device="cuda").to(dtype)
        return o, z, torch.ones(D, device="cuda", dtype=dtype), 1e-6

    def io(T):  # q, k, v, o, beta (model dtype) and g (fp32)
        return T * ((2 * QK + 2 * VW + H) * es + 4 * H)

    for T in (1, 16):
        yield ("causal_conv1d_update",) * 2 + (T, lambda T=T: conv_args(T),
                                              2 * T * C * es + C * K * es + 2 * C * (K - 1) * 4)
        yield ("gdn_recurrent",) * 2 + (T, lambda T=T: gdn_args(T), 2 * state + io(T))
        yield ("gdn_recurrent_states",) * 2 + (T, lambda T=T: gdn_args(T), (1 + T) * state + io(T))
        yield ("rms_norm_gated",) * 2 + (T, lambda T=T: norm_args(T), 3 * T * VW * es + D * es)
    # prefill: the backend's gdn_chunked (the token-by-token kernel) against the reference's chunked form
    yield "gdn_chunked", "gdn_chunked", 2048, lambda: gdn_args(2048), 2 * state + io(2048)


def run(backends: list[str]) -> list[dict]:
    from ninfer.backends import backend_statuses, installed_backends
    from ninfer.ops import DeviceSpec, resolve

    runnable = [s.name for s in backend_statuses(torch.device("cuda")) if s.can_run and s.name != "reference"]
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s (bytes read + written)",
          flush=True)
    rows = []
    for name in backends or runnable:
        if name not in runnable:
            raise SystemExit(f"backend {name!r} cannot run on this GPU; runnable here: {', '.join(runnable)}")
        dtype = installed_backends()[name].dtypes[0]
        spec = DeviceSpec.of(torch.device("cuda"), dtype)
        ops, reference = resolve(name, spec), resolve("reference", spec)
        for op, ref_op, T, make, nbytes in cases(dtype):
            args, kernel_fn, ref_fn = make(), getattr(ops, op), getattr(reference, ref_op)
            t_kernel = graph_time(lambda f=kernel_fn, a=args: f(*a))
            t_ref = graph_time(lambda f=ref_fn, a=args: f(*a))
            rows.append({"backend": name, "dtype": str(dtype).removeprefix("torch."), "op": op, "T": T,
                         "reference_op": ref_op, "impl": ops.impls[op].name,
                         "kernel_us": round(t_kernel * 1e6, 2), "reference_us": round(t_ref * 1e6, 2),
                         "speedup": round(t_ref / t_kernel, 1),
                         "bytes": nbytes, "GB_s": round(nbytes / t_kernel / 1e9, 1),
                         "of_copy_bw": round(nbytes / t_kernel / bw, 3)})
            r = rows[-1]
            print(f"{name:6} {r['dtype']:8} {op:22} T={T:<4} kernel {r['kernel_us']:8.2f} us  reference "
                  f"{r['reference_us']:9.2f} us ({ref_op}) x{r['speedup']:<6} {r['GB_s']:7.1f} GB/s = "
                  f"{r['of_copy_bw']:.2f} of copy  [{r['impl']}]", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", default=[],
                    help="backend(s) to time; default: every runnable one")
    ap.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/gdn_kernels.py needs a CUDA GPU; run it on the GPU machine.")
    rows = run(args.backend)
    if args.json:
        print(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
