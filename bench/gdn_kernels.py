"""Gated DeltaNet decode/verify kernels against the reference torch ops, at the Qwen3.5-27B shapes.

For each backend that runs here, each op (conv1d update, gated delta rule, its verify form, the gated
output norm) at decode (T=1) and verify (T=16) widths: the median time per call over CUDA-event-timed
repeats of a CUDA graph holding CALLS calls (as the engine runs them: no Python in the timing), for
the backend's kernel and for the reference op, and the kernel's bytes moved per second as a fraction
of the measured device copy bandwidth. Prefill rows (T=2048, the runner's prefill piece): gdn_chunked
served by the chunked kernels (the tensor-core state pass, the CUDA-core one at both slice widths), by the old
token-by-token kernel
(NINFER_GDN_CHUNKED=0) and by the reference's chunked torch form, and causal_conv1d_prefill by its kernel
and by the reference; each with its time scaled to a whole 8K prompt over the 27B's 48 GDN layers
(x 4 pieces x 48), against the ~4 ms per layer the 9K tok/s goal leaves them. Last, full attention of the
last 2048-token piece of an 8K prompt (27B heads): torch SDPA with the bottom-right causal mask vs the
boolean mask tensor (NINFER_PREFILL_ATTN=mask).

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
from timing import event_median_s  # noqa: E402

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
    return event_median_s(run, REPS) / CALLS


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

    for T in (1, 16):  # (op, reference op, T, args, bytes, env while timing the kernel)
        yield ("causal_conv1d_update",) * 2 + (T, lambda T=T: conv_args(T),
                                              2 * T * C * es + C * K * es + 2 * C * (K - 1) * 4, {})
        yield ("gdn_recurrent",) * 2 + (T, lambda T=T: gdn_args(T), 2 * state + io(T), {})
        yield ("gdn_recurrent_states",) * 2 + (T, lambda T=T: gdn_args(T), (1 + T) * state + io(T), {})
        yield ("rms_norm_gated",) * 2 + (T, lambda T=T: norm_args(T), 3 * T * VW * es + D * es, {})
    # prefill pieces: the chunked kernels (two slice widths), the old token-by-token kernel, the reference
    P = 2048
    for env in ({"NINFER_GDN_CHUNK_STATE": "mma"}, {"NINFER_GDN_CHUNK_STATE": "simt", "NINFER_GDN_CHUNK_BV": "16"},
                {"NINFER_GDN_CHUNK_STATE": "simt", "NINFER_GDN_CHUNK_BV": "32"}, {"NINFER_GDN_CHUNKED": "0"}):
        yield "gdn_chunked", "gdn_chunked", P, lambda: gdn_args(P), 2 * state + io(P), env
    yield ("causal_conv1d_prefill",) * 2 + (P, lambda: conv_args(P), 2 * P * C * es + C * K * es + 2 * C * (K - 1) * 4,
                                            {})


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
        ref_times = {}
        for op, ref_op, T, make, nbytes, env in cases(dtype):
            args, kernel_fn, ref_fn = make(), getattr(ops, op), getattr(reference, ref_op)
            saved = {key: os.environ.get(key) for key in env}
            os.environ.update(env)
            try:
                t_kernel = graph_time(lambda f=kernel_fn, a=args: f(*a))
            finally:
                for key, val in saved.items():
                    if val is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = val
            if (ref_op, T) not in ref_times:
                ref_times[ref_op, T] = graph_time(lambda f=ref_fn, a=args: f(*a))
            t_ref = ref_times[ref_op, T]
            variant = ",".join(f"{k_}={v_}" for k_, v_ in env.items())
            rows.append({"backend": name, "dtype": str(dtype).removeprefix("torch."), "op": op, "T": T,
                         "variant": variant, "reference_op": ref_op, "impl": ops.impls[op].name,
                         "kernel_us": round(t_kernel * 1e6, 2), "reference_us": round(t_ref * 1e6, 2),
                         "speedup": round(t_ref / t_kernel, 1),
                         "bytes": nbytes, "GB_s": round(nbytes / t_kernel / 1e9, 1),
                         "of_copy_bw": round(nbytes / t_kernel / bw, 3)})
            r = rows[-1]
            print(f"{name:6} {r['dtype']:8} {op:22} T={T:<4} kernel {r['kernel_us']:8.2f} us  reference "
                  f"{r['reference_us']:9.2f} us ({ref_op}) x{r['speedup']:<6} {r['GB_s']:7.1f} GB/s = "
                  f"{r['of_copy_bw']:.2f} of copy  [{r['impl']}{' ' + variant if variant else ''}]", flush=True)
            if T >= 1024:  # a prefill piece: the whole 8K prompt over the 27B's 48 GDN layers
                per_prompt = t_kernel * (8192 / T) * 48
                print(f"        -> {per_prompt * 1e3:7.1f} ms per 8K prompt over 48 layers ({t_kernel * 8192 / T * 1e3:.2f} "
                      f"ms per layer; the 9K tok/s goal leaves ~4 ms per layer for all its non-GEMM work)", flush=True)
                r["ms_per_8k_prompt_48_layers"] = round(per_prompt * 1e3, 2)
    return rows


def prefill_attention() -> list[dict]:
    """The last 2048-token piece of an 8K prompt through prefill_sdpa (24 query / 4 KV heads of 256):
    bottom-right causal mask vs the boolean mask tensor."""
    from ninfer.kernels.attention import prefill_sdpa

    T, L, Hq, Hk, Dh, bs = 2048, 8192, 24, 4, 256, 64
    kc = torch.randn(L // bs + 8, bs, Hk, Dh, device="cuda").to(torch.bfloat16)
    vc = torch.randn_like(kc)
    bt = torch.randperm(kc.shape[0], device="cuda")[: L // bs].to(torch.int32)
    q = torch.randn(T, Hq, Dh, device="cuda").to(torch.bfloat16)
    positions = torch.arange(L - T, L, device="cuda")
    flops = 4 * Hq * Dh * (T * (L - T) + T * T / 2)  # QK^T and PV over the attended keys
    rows = []
    for variant in ("lower_right", "mask"):
        os.environ["NINFER_PREFILL_ATTN"] = variant
        fn = lambda: prefill_sdpa(q, kc, vc, bt, positions, Dh ** -0.5)  # noqa: E731
        fn()
        torch.cuda.synchronize()
        t = event_median_s(fn, 7)
        rows.append({"op": "prefill_sdpa", "variant": variant, "T": T, "L": L, "ms": round(t * 1e3, 3),
                     "TFLOP_s": round(flops / t / 1e12, 1)})
        print(f"prefill attention T={T} L={L} ({variant:11}): {t * 1e3:7.3f} ms  {flops / t / 1e12:6.1f} TFLOP/s "
              f"(x16 layers x ~2.5 pieces' worth per 8K prompt)", flush=True)
    os.environ.pop("NINFER_PREFILL_ATTN", None)
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
    rows += prefill_attention()
    if args.json:
        print(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
