"""The tensor-core GEMV (kernels/gemv.py, gemv.cuh: gemv_mma) against the CUDA-core kernels it replaces and
cuBLAS, on every decode/verify GEMV shape of Llama-3-8B, Qwen3-8B and Qwen3.5-27B, bf16, in GB/s of weights
read and as a fraction of the device copy bandwidth measured in the same call.

Per shape: 1 token (old = the CUDA-core kernel with its split-K rule; mma = the default tuning and K split;
mma ksg=n = that K split forced; variants of rows per warp / chunks in flight / warps per block, compiled
here), the SwiGLU-fused gate_up GEMV where the model has one, and 2/4/8/16 tokens (verify widths).
Each figure: INNER calls captured in one CUDA graph (weights rotated over copies past the L2), median of
10 replays.

    python bench/gemv_mma.py [--backend sm90] [--json out.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import graph_us

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# (N, K, fused gate_up) of the decode GEMVs: 8B (Llama-3 / Qwen3) and the 27B hybrid
SHAPES = [(6144, 4096, False), (4096, 4096, False), (28672, 4096, True), (4096, 14336, False),
          (128256, 4096, False), (24576, 4096, True), (4096, 12288, False), (151936, 4096, False),
          (16384, 5120, False), (96, 5120, False), (14336, 5120, False), (5120, 6144, False),
          (34816, 5120, True), (5120, 17408, False), (248320, 5120, False)]
# name: (MT, U8, U16, MT_SILU, WARPS)
VARIANTS = {"m1u4": (1, 4, 4, 2, 4), "m1u12": (1, 12, 6, 2, 4), "m2u4": (2, 4, 4, 4, 4), "m2u8": (2, 8, 4, 4, 4),
            "m1u8w8": (1, 8, 4, 2, 8), "m1u8w2": (1, 8, 4, 2, 2)}


def variant_library():
    from ninfer.kernels.library import KernelLibrary

    src = "#define NINFER_L2_PREFETCH_256B\n#include <ninfer/kernels.cuh>\n"
    for name, (mt, u8, u16, mts, w) in VARIANTS.items():
        for silu, m in ((False, mt), (True, mts)):
            for nt, u in ((1, u8), (2, u16)):
                kn = f"{name}_{'silu_' if silu else ''}bf16_n{8 * nt}"
                src += (f'extern "C" __global__ void __launch_bounds__({w * 32}) {kn}(const __nv_bfloat16 *W, '
                        "const __nv_bfloat16 *x, const __nv_bfloat16 *b, __nv_bfloat16 *y, float *part, int *ctr, "
                        "int N, int K, int ntok, int ksg) { ninfer::pdl_enter(); ninfer::gemv_mma<__nv_bfloat16, "
                        f"{m}, {nt}, {u}, {w}, {'true' if silu else 'false'}>(W, x, b, y, part, ctr, N, K, ntok, ksg); }}\n")
    d = Path(tempfile.mkdtemp())
    (d / "kernels.cu").write_text(src)
    return KernelLibrary("gemv_variants", d / "kernels.cu", (torch.bfloat16,), ("sm_90",))


def graph_us_sized(fn, nbytes: int) -> float:
    """Median us per call, graphs of enough calls (4..40) to run ~3 ms at 4 TB/s."""
    return graph_us(fn, int(min(40, max(4, 3e-3 * 4e12 / nbytes))), reps=10, drop=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="no variants, no forced splits")
    a = ap.parse_args()
    from decode import copy_bandwidth

    from ninfer.backends import installed_backends
    from ninfer.kernels import gemv
    from ninfer.kernels.ops import make_ops

    bw = copy_bandwidth()
    sms = gemv.sm_count(torch.cuda.current_device())
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.3f} TB/s  {sms} SMs", flush=True)
    lib = installed_backends()[a.backend].kernels
    ops = make_ops(lib)
    linear, silu_op = ops["linear"], ops["linear_silu_mul"]
    default_mode = gemv.MODE
    vlib = None if a.quick else variant_library()
    variants = {} if a.quick else {
        n: gemv.MmaGemv(vlib, prefix=f"{n}_", MT=v[0], U8=v[1], U16=v[2], MT_SILU=v[3], WARPS=v[4])
        for n, v in VARIANTS.items()}
    rows = []

    def rec(N, K, T, kind, name, us, ok):
        nbytes = N * K * 2
        r = {"N": N, "K": K, "T": T, "kind": kind, "variant": name, "us": us, "GBs": nbytes / us / 1e3,
             "of_copy": nbytes / us / 1e3 / (bw / 1e9), "ok": ok}
        rows.append(r)
        return r

    def check(y, want) -> bool:
        return bool(((y.float() - want).norm() / want.norm()).item() < 2e-2)

    def bench_shape(N, K, fused):
        nbytes = N * K * 2
        copies = max(2, -(-(300 * 2**20) // nbytes))
        Ws = [(torch.randn(N, K, device="cuda") * K ** -0.5).to(torch.bfloat16) for _ in range(copies)]
        xs = torch.randn(16, K, device="cuda").to(torch.bfloat16)
        ksg_rule = gemv.k_splits(N, K, sms)
        out = []
        for T in (1, 2, 4, 8, 16):
            x = xs[:T]
            want = F.linear(x.float(), Ws[0].float())
            cands = [("cublas", lambda i, x=x: F.linear(x, Ws[i % copies]), "simt"),
                     ("old", lambda i, x=x: linear(x, Ws[i % copies]), "simt"),
                     (f"mma(ksg={ksg_rule})", lambda i, x=x: linear(x, Ws[i % copies]), "mma")]
            if T == 1 and not a.quick:
                for k in (1, 2, 4, 8):
                    if k != ksg_rule:
                        cands.append((f"mma ksg={k}", lambda i, x=x: linear(x, Ws[i % copies]), f"mma:{k}"))
                for n, v in variants.items():
                    cands.append((n, lambda i, x=x, v=v: v(x, Ws[i % copies]), "mma"))
            for name, fn, mode in cands:
                gemv.MODE = mode.split(":")[0]
                if ":" in mode:
                    os.environ["NINFER_GEMV_KSG"] = mode.split(":")[1]
                try:
                    ok = check(fn(0), want)
                    us = graph_us_sized(fn, nbytes)
                except Exception as e:  # report and go on: one broken variant must not hide the table
                    print(f"  FAILED {N}x{K} T={T} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                    continue
                finally:
                    os.environ.pop("NINFER_GEMV_KSG", None)
                    gemv.MODE = default_mode
                r = rec(N, K, T, "linear", name, us, ok)
                out.append(f"{name}={r['GBs']:.0f}({r['of_copy']:.2f}){'' if ok else '!WRONG'}")
            print(f"GEMV {N}x{K} T={T}: " + " ".join(out), flush=True)
            out = []
        if fused:
            for T in (1, 8, 16):
                x = xs[:T]
                g_, u_ = F.linear(x.float(), Ws[0].float()).to(torch.bfloat16).float().chunk(2, dim=-1)
                want = F.silu(g_) * u_
                cands = [("old", lambda i, x=x: silu_op(x, Ws[i % copies]), "simt"),
                         (f"mma(ksg={ksg_rule})", lambda i, x=x: silu_op(x, Ws[i % copies]), "mma")]
                if T == 1:
                    cands += [(n, lambda i, x=x, v=v: v(x, Ws[i % copies], None, silu=True), "mma")
                              for n, v in variants.items()]
                for name, fn, mode in cands:
                    gemv.MODE = mode
                    try:
                        ok = check(fn(0), want)
                        us = graph_us_sized(fn, nbytes)
                    except Exception as e:
                        print(f"  FAILED silu {N}x{K} T={T} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                        continue
                    finally:
                        gemv.MODE = default_mode
                    r = rec(N, K, T, "linear_silu_mul", name, us, ok)
                    out.append(f"{name}={r['GBs']:.0f}({r['of_copy']:.2f}){'' if ok else '!WRONG'}")
                print(f"GEMV+SiLU {N}x{K} T={T}: " + " ".join(out), flush=True)
                out = []
    for N, K, fused in SHAPES:
        bench_shape(N, K, fused)
        torch.cuda.empty_cache()

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "sms": sms, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
