"""What a decode step would take without some of its small kernels: an upper bound on what fusing them can win.

Not a correctness run: the ops named are replaced by ones that launch nothing (their outputs are wrong), and the
decode graph of a random-weight model is timed as ``bench/decode.py`` times it (the engine's pipelined loop, and the
graph replayed back to back), beside the unchanged model on the same weights in the same process.

    python bench/whatif.py --shape llama3-8b --ctx 512 --variants base,norm,rope,attn,norm+rope,base

Variants (``+`` combines them): ``base`` nothing removed; ``norm`` every residual add + RMSNorm of the layers
(``add_rms_norm``: the output is the input, the residual unchanged); ``rope`` the q/k RoPE and KV write
(``rope_write_kv``: q as it left the projection); ``attn`` the decode attention (split and combine kernels: the
output is q); ``gdn`` the Gated DeltaNet recurrence and output norm (``gdn_recurrent_gated``: the output is v, the
state unchanged). Not removals, outputs correct: ``late`` the decode attention compiled with
-DNINFER_PDL_EARLY_LOADS=0 (every read after its wait; the sm90 backend's default reads older keys before it),
precompiled with bench/precompile_variants.sh; ``gdnlate`` the Gated DeltaNet recurrence compiled with
-DNINFER_GDN_STATE_L2=0 (no L2 prefetch of its state before the wait; likewise precompiled); ``cluster16w4``,
``cluster8w8``, ``cluster16w8`` the one-launch decode attention (NINFER_ATTN_CLUSTER; attention.cuh: attention_cluster).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random_model as rm  # noqa: E402
from decode import copy_bandwidth, step_bytes  # noqa: E402
from timing import decode_rates  # noqa: E402

from ninfer.kernels.library import ATTN_CLUSTER_FORMS  # noqa: E402


def _no_norm(x, residual, weight, eps, zero_centered=False, fixed=False):
    return x, residual


def _no_rope(q, k, v, positions, cos_sin, k_cache, v_cache, slots, q_norm=None, k_norm=None, eps=1e-6,
             zero_centered=False):
    return q


def _no_attn(q, k_cache, v_cache, block_table, positions, scale):
    return q


def _no_gdn(q, k, v, g, beta, initial_state, z, norm_weight, eps, out_state=None, keep_all=False, fixed=False):
    return v, out_state if out_state is not None else initial_state


def _no_attn_gated(q, k_cache, v_cache, block_table, positions, scale, gate, fixed=False):
    return q


# variant part -> the ops it replaces by ones that launch nothing ("attn" takes the gated form with it: since session
# 29 a gated layer's output gate runs inside attention's combine, so without attention there is no gate either)
REMOVED = {"norm": (("add_rms_norm", _no_norm),), "rope": (("rope_write_kv", _no_rope),),
           "attn": (("paged_attention", _no_attn), ("attention_gated", _no_attn_gated)),
           "gdn": (("gdn_recurrent_gated", _no_gdn),)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sm90")
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--variants", default="base,norm,rope,attn,norm+rope+attn,base")
    a = ap.parse_args()
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}  copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    cap = a.ctx + a.new + 64
    runner, weights = rm.build(a.shape, a.backend, "cuda", torch.bfloat16, 64)
    del runner
    prompt = torch.randint(0, 1000, (a.ctx,), generator=torch.Generator().manual_seed(0)).tolist()
    from ninfer.backends import installed_backends

    lib = installed_backends()[a.backend].kernels
    base_options = lib.options
    base_rate = None
    for v in a.variants.split(","):
        parts = v.split("+")
        clusters = [p for p in parts if p in ATTN_CLUSTER_FORMS]  # the one-launch decode attention
        os.environ["NINFER_ATTN_CLUSTER"] = clusters[0] if clusters else "0"  # read at each launch
        opts = base_options + (("-DNINFER_PDL_EARLY_LOADS=0",) if "late" in parts else ()) + (
            ("-DNINFER_GDN_STATE_L2=0",) if "gdnlate" in parts else ())
        lib.set_options(opts)
        runner, _ = rm.build(a.shape, a.backend, "cuda", torch.bfloat16, cap, weights=weights)
        impls = runner.model.ops.impls
        for part in parts:
            if part in REMOVED:
                for op, fn in REMOVED[part]:
                    impls[op] = dataclasses.replace(impls[op], fn=fn)
            elif part not in ("base", "late", "gdnlate", *ATTN_CLUSTER_FORMS):
                raise SystemExit(f"unknown variant part {part!r}")
        tok_s, gpu = decode_rates(runner, prompt, a.new)
        nbytes = step_bytes(runner, weights, a.ctx + a.new // 2)
        if v == "base":
            base_rate = gpu
        saved = f", {1e6 / base_rate - 1e6 / gpu:6.1f} us a step less than base" if base_rate and v != "base" else ""
        print(f"RESULT {a.shape} ctx={a.ctx} variant={v:18s} pipelined {tok_s:6.1f} tok/s ({nbytes * tok_s / bw:.3f} "
              f"of copy bw); graph back to back {gpu:6.1f} tok/s = {1e6 / gpu:7.1f} us a step{saved}", flush=True)
        del runner
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
