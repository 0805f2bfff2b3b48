"""Decode speed of grouped-int weights on the GPU: W4A16 (27B shape) and W8A16 (8B shape), group 128.

1. GEMV-only (``gemv``): every Linear of L layers in one CUDA graph, batch 1 and verify widths, through
   the CUDA-core kernel (``qgemv_*``, the weights in row packing), the tensor-core kernel's variants
   (VARIANTS, picked with --variants: its per-tile form ``qmma_*`` and split form ``qmsk_*``, loads in flight,
   the previous version from bench/quant_legacy_qgemv.cu, ...) and the same shapes in bf16 through cuBLAS as
   the peer. Bytes
   are what each kernel reads: codes plus scales as it stores them (qgemv: float32 scale and offset;
   qmma: 16-bit scales).
2. Sweep (``sweep``): per matrix shape (copies past L2, ~1 GB), GB/s of qmma for warps per tile x loads
   in flight per lane (QM_U), beside the launcher's default choice.
3. End to end (``e2e``): a random-weight model of the shape (every Linear in the layers quantised with
   random codes; embedding, lm_head, norms, GDN parameters bf16) through ModelRunner with CUDA graphs,
   as bench/decode.py does for bf16: 128 greedy tokens after a 512-token prompt (prefill dequantises and
   calls cuBLAS), qgemv and the --variants on the same weights. Step GB = the codes and scales the decode kernel
   reads + dense weights (embedding excepted) + KV + recurrent state; fraction of the copy bandwidth
   measured in the same process.
4. Profile (``profile``): kernel time per eager decode step of the quantised model (few layers, CUDA
   graphs off), grouped by kernel, as bench/decode_profile.py does for bf16.
5. Prefill (``prefill``): a --prefill-ctx-token prompt from an empty cache through the same random-weight model, the
   weights dequantised for cuBLAS by the ``qdeq_*`` kernel (the default) and by ``layout.dequantize``'s torch ops
   (before), same process; tok/s and the fraction of the bf16 matmul rate measured in the same call (run
   bench/decode.py in the same call for the bf16 model's prefill).

    python bench/quant.py --layers 16 --parts gemv,sweep,e2e --e2e-layers 64
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPES = {  # name: (bits, hidden, q_out, kv_out, intermediate, layers, random_model shape, e2e weights)
    "27B W4A16 g128": (4, 5120, 6144, 1024, 17408, 64, "qwen3.5-27b"),
    "8B W8A16 g128": (8, 4096, 4096, 1024, 14336, 32, "llama3-8b"),
}
GROUP = 128
QGEMV = True  # --no-qgemv: leave the CUDA-core kernel out of the A/B
LEGACY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_legacy_qgemv.cu")


VARIANTS = {  # label: ninfer.quant.gpu settings (source: the previous qmma's .cu; extra: -D options; split: the kernel
    # widths taking the split form, all by default; block: threads a split block; min_chunks: SK_MIN_CHUNKS;
    # backend_opts: -D options of the sm90 backend's kernels)
    "qmma previous (881a477)": dict(split=(), source=LEGACY),
    "qmma per tile, shared-memory ring": dict(split=(), extra=("-DQM_SMEM_RING",)),
    "qmma per tile, QM_RAW": dict(split=(), extra=("-DQM_RAW",)),
    "qmma per tile (previous default)": dict(split=()),
    "default (per tile 1..8 tokens, split 9..16)": dict(split=(16,)),
    "qmsk split": dict(),
    "qmsk split, int4 U=6": dict(extra=("-DQSK_U4=6",)),
    "qmsk split, int8 U=2": dict(extra=("-DQSK_U8=2",)),
    "default, split with int8 U=2": dict(split=(16,), extra=("-DQSK_U8=2",)),
    "qmsk split, 128-thread blocks": dict(block=128),
    "qmsk split, >= 16 chunks a warp": dict(min_chunks=16),
    "qmma per tile, sweep's best per shape": dict(split=()),
    # session 5 (ncu: int4 at 74 registers a thread, 24 warps an SM, issue slots half idle): the default is QM_U=3
    "default, QM_U=2": dict(split=(16,), extra=("-DQM_U=2",)),
    "default, QM_U=3": dict(split=(16,), extra=("-DQM_U=3",)),  # = the default since session 5
    "QM_U=4 (the default before session 5)": dict(split=(16,), extra=("-DQM_U=4",)),
    "QM_U=4, maxrregcount 64": dict(split=(16,), extra=("-DQM_U=4", "--maxrregcount=64")),
    # session 6: one token of int4 through qmv1 (raw codes, offsets off by chunk sums of the activations)
    "default (qmv1 for one token)": dict(split=(16,)),
    "qmma for one token (before qmv1)": dict(split=(16,), qmv1=False),
    "qmma for 1..8 tokens (before qmv1 / qmv8)": dict(split=(16,), qmv1=False, qmv8=False),
    "qmv16 for 9..16 tokens": dict(split=(16,), qmv16=True),
    "int4 64 registers": dict(split=(16,), extra=("-DQMV_MAXREG4=64",)),
    "int4 72 registers": dict(split=(16,), extra=("-DQMV_MAXREG4=72",)),
    "qmv1 burst 2, pipelined": dict(split=(16,), extra=("-DQMV_BURST=2", "-DQMV_PIPE=1")),
    "qmv1 burst 4, pipelined": dict(split=(16,), extra=("-DQMV_BURST=4", "-DQMV_PIPE=1")),
    "qmv1 burst 8": dict(split=(16,), extra=("-DQMV_BURST=8",)),
    # session 12: the bursts' weight, scale and zero-point addresses as before the stepped pointer (QMV_ADDR=1, default)
    "qmv1 addresses as before (QMV_ADDR=0)": dict(split=(16,), extra=("-DQMV_ADDR=0",)),
    # session 12: the next burst in flight at the default caps (int4 69-71 registers, int8 58-61, no spills: 28 and 32
    # warps an SM), and at 64 registers for int4 (32 warps)
    "qmv1 burst 2, pipelined, int4 64 registers": dict(split=(16,), extra=("-DQMV_BURST=2", "-DQMV_PIPE=1",
                                                                         "-DQMV_MAXREG4=64")),
    "qmv1 burst 4, pipelined, int4 96 registers": dict(split=(16,), extra=("-DQMV_BURST=4", "-DQMV_PIPE=1",
                                                                         "-DQMV_MAXREG4=96")),
    "qmv1 burst 4, 80 registers": dict(split=(16,), extra=("-DQMV_MAXREG=80",)),
    "qmv1 burst 4, 72 registers": dict(split=(16,), extra=("-DQMV_MAXREG=72",)),
    "qmv1 burst 4, 80 registers, L2 prefetch 1 ahead": dict(split=(16,), extra=("-DQMV_MAXREG=80", "-DQMV_L2PF=1")),
    "qmv1 burst 4, 80 registers, L2 prefetch 2 ahead": dict(split=(16,), extra=("-DQMV_MAXREG=80", "-DQMV_L2PF=2")),
    "qmv1 burst 4, registers uncapped": dict(split=(16,), extra=("-DQMV_MAXREG=128",)),
    "qmv1 burst 8, registers uncapped": dict(split=(16,), extra=("-DQMV_MAXREG=128", "-DQMV_BURST=8")),
    "qmv1 burst 4 pipelined, registers uncapped": dict(split=(16,), extra=("-DQMV_MAXREG=128", "-DQMV_PIPE=1")),
    "qmv1 burst 2": dict(split=(16,), extra=("-DQMV_BURST=2",)),
    # session 10: SwiGLU in the one-token gate_up GEMV's epilogue (qmv1s) is the default; this is the two launches
    "gate_up GEMV then silu_mul (before qmv1s)": dict(split=(16,), qmv1s=False),
    # session 11: a Gated DeltaNet layer's conv update and gates in its one-token input projection (qmv1g) is the
    # default; this runs the joined [in_proj | in_proj_ba] GEMV, then the conv and gate kernels (three launches; four
    # before session 11, when in_proj and in_proj_ba were two GEMVs)
    "GDN projection, conv, gates one by one (before qmv1g)": dict(split=(16,), qmv1g=False),
    # session 11: warps a tile for the burst kernels by waves of resident blocks (qmv_warps) is the default; this is
    # mma_warps' rule (planned for 32 resident warps an SM)
    "qmv1 warps by mma_warps (before waves)": dict(split=(16,), qmv_waves=False),
    # "qmv1, int4 subtracting per code" (-DQMV_NORAW, call 4) is the default since the raw-code form was removed
    "qmv1, 4 warps a tile": dict(split=(16,), qmv_warps=4),
    "qmv1, 8 warps a tile": dict(split=(16,), qmv_warps=8),
    "qmv1, 16 warps a tile": dict(split=(16,), qmv_warps=16),
    # session 15: int8 codes with bf16 activations multiply in fp16 (qgemv.cu: X16) by default; this multiplies in bf16
    "int8 with bf16 activations multiplied in bf16 (before X16)": dict(split=(16,), extra=("-DQMV_X16=0",)),
    # session 16, diagnostics (results wrong, speed only): the burst kernel's loads alone, and its products alone on
    # L2-resident weights (qgemv.cu: QMV_DIAG)
    "diag: loads only": dict(split=(16,), extra=("-DQMV_DIAG=1",)),
    "diag: loads only, burst 8": dict(split=(16,), extra=("-DQMV_DIAG=1", "-DQMV_BURST=8")),
    "diag: products only (weights from L2)": dict(split=(16,), extra=("-DQMV_DIAG=2",)),
    "diag: products only (weights from L1)": dict(split=(16,), extra=("-DQMV_DIAG=3",)),
    # session 17: one token's activations in B column 0 only, the other 7 columns zero (same sums; tensor-core power)
    "one token, B columns 1-7 zero": dict(split=(16,), extra=("-DQMV_ZB=1",)),
    # session 17: the next burst in flight (QMV_PIPE) with the burst's activations loaded before it (QMV_XFIRST), so
    # that loads returning in order do not hold the activations behind the next burst's weights
    "next burst in flight, activations after it (PIPE)": dict(split=(16,), extra=("-DQMV_PIPE=1",)),
    "PIPE + XFIRST, 96 / 80 registers": dict(split=(16,), extra=("-DQMV_PIPE=1", "-DQMV_XFIRST=1", "-DQMV_MAXREG4=96",
                                                                  "-DQMV_MAXREG8=80")),
    "PIPE + XFIRST, 128 / 96 registers": dict(split=(16,), extra=("-DQMV_PIPE=1", "-DQMV_XFIRST=1",
                                                                   "-DQMV_MAXREG4=128", "-DQMV_MAXREG8=96")),
    "PIPE + XFIRST, bursts of 2, 72 / 64 registers": dict(split=(16,), extra=("-DQMV_BURST=2", "-DQMV_PIPE=1",
                                                                               "-DQMV_XFIRST=1", "-DQMV_MAXREG4=72")),
    "PIPE + XFIRST, bursts of 2, 64 / 64 registers": dict(split=(16,), extra=("-DQMV_BURST=2", "-DQMV_PIPE=1",
                                                                               "-DQMV_XFIRST=1", "-DQMV_MAXREG4=64")),
    # session 17: the one-token int4 forms as persistent blocks, the activations in shared memory (qgemv.cu: qmvp)
    "persistent blocks (QMV_PERSIST)": dict(split=(16,), extra=("-DQMV_PERSIST=1",)),
    "persistent blocks, 96 registers": dict(split=(16,), extra=("-DQMV_PERSIST=1", "-DQMV_MAXREG4=96")),
    # session 16, e2e only: the default kernels with some of the decode step's other ops replaced by ones that launch
    # nothing (outputs wrong; as bench/whatif.py does for bf16 models): what they cost a quantised step at most
    # session 23: one token of int4 in 16-bit fixed point on the integer tensor cores (qmv1f*, the norms making the
    # form); the default since session 24, with its group loads predicated (QMV_FIXFETCH). (Fewer blocks an SM for
    # it, by unused shared memory, lost: code in 13be5a7.)
    "int4 one token in bf16 (qmv1, before qmv1f)": dict(split=(16,), qmv1f=False),
    "qmv1f, group loads behind branches (QMV_FIXFETCH=0, session 23)": dict(split=(16,), extra=("-DQMV_FIXFETCH=0",)),
    "qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)": dict(split=(16,), qmv1f_down=True),
    # (session 30: that form's group count as an acquire-release atomic, with down let launch after the SwiGLU GEMV's
    # sums, brought it from -2.4 % to level with the default on an H100; the late launch alone, down making its own
    # form, -0.1 to -1.4 % on both models; removed, code in 2828f9d)
    # session 25: GDN out_proj and attention o on qmv1f, the form from the recurrence / the output gate (default)
    # session 25: int4 one-token GEMVs ask L2 for their next 2 bursts before the PDL wait (default; int8 never)
    "no bursts into L2 before the PDL wait (QMV_PREPF=0, before session 25)": dict(split=(16,), extra=("-DQMV_PREPF=0",)),
    "the next 4 bursts into L2 before the PDL wait (QMV_PREPF=4)": dict(split=(16,), extra=("-DQMV_PREPF=4",)),
    "mixer outputs from the bf16 row (NINFER_QMV1F_OUT=0, session 24's default)": dict(split=(16,), qmv1f_out=False),
    # session 26: one token of int8 in the same fixed-point form on the integer tensor cores (qgemv.cu FIX8; default)
    "int8 one token in fp16 (qmv1, NINFER_QMV1F_INT8=0, before session 26)": dict(split=(16,), qmv1f_int8=False),
    # (session 26's NINFER_QMV_AHEAD, o asking L2 for its whole weight during attention, lost 1.1 %: removed; code in 507e1ec)
    "lm_head from the final norm's form (NINFER_QMV1F_HEAD=1)": dict(split=(16,), qmv1f_head=True),
    # session 27: FIX8's loads predicated (no branch in its loop, as int4's since session 24; the default after call
    # 1); qmv1x (the form made per burst from the row where no op writes it). Bursts of 8 chunks (int8, int4) and the
    # next 2 int8 bursts into L2 before the PDL wait lost: removed, code in cc5373e.
    "int8 fixed point, a branch around the burst loads (QMV_FIX8P=0, before session 27)": dict(
        split=(16,), extra=("-DQMV_FIX8P=0",)),
    "one token without a form makes it from the row (qmv1x, NINFER_QMV1X=1)": dict(split=(16,), qmv1x={4, 8}),
    "no qmv1x (NINFER_QMV1X=0, before session 27)": dict(split=(16,), qmv1x=()),
    "the forms' q through a division (-DNINFER_FIXED_DIV=1, before session 28)": dict(
        split=(16,), backend_opts=("-DNINFER_FIXED_DIV=1",)),
    # session 29: decode attention's query rows a block where a GQA group exceeds the one-pass form's 4 (kernels/
    # attention.py DECODE_BLOCK_ROWS, default 2). The 27B's 6 q heads a kv head ran the two-pass split in one block;
    # in blocks of 3 or 2 rows they run the one-pass form, which requests its first K/V rows before its PDL wait
    # (attention.cuh: split_pass EARLY), each block reading the split's K/V (the second read from L2). (Call 2 ran
    # every group so, the 8B's 4 in 2 blocks of 2 too: 0.5-1.1 % slower than one block; now a group of <= 4 stays in one.)
    "decode attention in blocks of <= 8 query rows (before session 29)": dict(split=(16,), attn_rows=8),
    "decode attention in blocks of <= 4 query rows": dict(split=(16,), attn_rows=4),
    # session 29: Qwen3.5's attention output gate applied by the combine kernel (attention_gated)
    "the output gate in its own launch (sigmoid_mul, before session 29)": dict(split=(16,), gate_apart=True),
    # (session 29: the norm letting the next kernel launch after its row's loads, or at its exit, instead of after its
    # wait: the 27B 1.4-2.7 % and 3.4-4.7 % slower on an H100; removed, code in a2cbb4c)
    # (session 30: the residual add and norm after the mixers' output projections and down done by that GEMV's last
    # block, qmv1n / qmv1fn / qmv1xn with NINFER_QMV_NORM=1, bit for bit the two ops: the 27B 1.5-6.6 % slower on an
    # H100 in every form tried, the 8B level; removed, code in 41f0816)
    # (session 31, prepared; run in session 32 on an H100: the one-token GDN recurrence asking L2, after its PDL wait,
    # for the first 8 / 16 MB of each half of gate_up's codes, NINFER_GDN_AHEAD, with its GPU test: 2.0-4.6 % slower
    # end to end; the code in commit 3fe39b1)
    # (session 32: the 27B's 320-tile one-token GEMVs with a tile's warps in a cluster of 2 blocks, qmv1xc / qmv1fc,
    # -DQMV_CLUSTER=1, bit for bit the block forms: 3.3-3.5 % slower on an H100, not run on the H200; the code, with
    # its GPU test, in 9d7a496)
    # (session 33, on an H100: the int4 fixed-point products with the high nibbles masked as 16 u instead of shifted,
    # -DQMV_FIX_M16=1, the same bits: level. The residual add and RMSNorm with no launch of their own, QMV_NORMIN (the
    # GEMV before them storing h and per-block sums of h^2, each block of the one after normalising h into its shared
    # fixed-point form): the 27B 12-13 % slower, the 8B 1-2 %, with the consumers summing the parts one load at a time;
    # the form issuing every load at once, and -DQMV_NORM_RPRE=1, prepared, not run. The code of all three, with their
    # GPU tests, in 4040650; bench/session33_call2.sh)
    # session 35: the small ops (residual add + RMSNorm, rope_write_kv's head norms, the recurrence's output norm) load
    # their weights before their PDL wait (the default since). (The gated recurrence staging its output gate z with
    # q, k, v, -DNINFER_GDN_Z_EARLY, was level on the 27B on an H100: removed, code in fa3768d.)
    "the small ops' weights read after their PDL wait (-DNINFER_W_EARLY=0, before session 35)": dict(
        split=(16,), backend_opts=("-DNINFER_W_EARLY=0",)),
    "without the norms": dict(split=(16,), remove=("norm",)),  # bench/whatif.py's REMOVED names
    "without attention": dict(split=(16,), remove=("attn",)),
    "without the GDN recurrence": dict(split=(16,), remove=("gdn",)),
    "without norms, attention, GDN recurrence": dict(split=(16,), remove=("norm", "attn", "gdn")),
}
DEFAULT = "default (per tile 1..8 tokens, split 9..16)"  # the launcher's defaults
QMMA_VARIANTS = ("qmma per tile (previous default)", DEFAULT)


_BACKEND_OPTS = None
_ATTN_ROWS = None


def variant(label: str):
    """Set ninfer.quant.gpu up for one kernel variant of the A/B (see VARIANTS); "" restores the defaults."""
    from pathlib import Path

    from ninfer.quant import gpu

    v = VARIANTS.get(label, {})
    gpu.BENCH_SOURCE = Path(v["source"]) if "source" in v else None
    gpu.BENCH_EXTRA = tuple(v.get("extra", ()))
    gpu.SPLIT_WIDTHS = set(v.get("split", (8, 16))) if label else {16}
    gpu.SK_BLOCK = v.get("block", 32)
    gpu.SK_MIN_CHUNKS = v.get("min_chunks", 4)
    gpu.QMV1 = v.get("qmv1", True)
    gpu.QMV1S = v.get("qmv1s", True)
    gpu.QMV1G = v.get("qmv1g", True)
    gpu.QMV1F = v.get("qmv1f", True)
    gpu.QMV1F_DOWN = v.get("qmv1f_down", False)
    gpu.QMV1F_OUT = v.get("qmv1f_out", True)
    gpu.QMV1F_INT8 = v.get("qmv1f_int8", True)
    gpu.QMV1F_HEAD = v.get("qmv1f_head", False)
    gpu.QMV1X = set(v.get("qmv1x", {4}))
    gpu.QMV_WAVES = v.get("qmv_waves", True)
    gpu.QMV8 = v.get("qmv8", True)
    gpu.QMV16 = v.get("qmv16", False)
    gpu.QMV_WARPS = v.get("qmv_warps")
    from ninfer.kernels import attention

    global _ATTN_ROWS  # query rows a block of one token's large GQA group: the launcher's default, or the variant's
    if _ATTN_ROWS is None:
        _ATTN_ROWS = attention.DECODE_BLOCK_ROWS
    attention.DECODE_BLOCK_ROWS = v.get("attn_rows", _ATTN_ROWS)
    global _BACKEND_OPTS  # the sm90 backend's build: its options plus the variant's backend_opts
    import ninfer_sm90

    if _BACKEND_OPTS is None:
        _BACKEND_OPTS = ninfer_sm90.LIBRARY.options
    ninfer_sm90.LIBRARY.set_options(_BACKEND_OPTS + tuple(v.get("backend_opts", ())))


ACT_DTYPE = torch.bfloat16  # --act-dtype


def random_quant(n: int, k: int, bits: int, group: int = GROUP, device="cuda"):
    """Random codes (uniform) with fp16 scales that give the weight a std of K^-1/2 (rows packing)."""
    from ninfer.quant.layout import QuantWeight

    q = torch.randint(0, 256, (n, k * bits // 8), dtype=torch.uint8, device=device)
    spread = math.sqrt(((1 << bits) ** 2 - 1) / 12)  # std of a uniform code
    s = (torch.rand(n, k // group, device=device) * 0.2 + 0.9) * (k ** -0.5 / spread)
    return QuantWeight(q, s.half(), bits, group, k)


def layer_shapes(hidden, q_out, kv_out, inter):
    return [(q_out + 2 * kv_out, hidden), (hidden, q_out), (2 * inter, hidden), (hidden, inter)]  # qkv, o, gate_up, down


def read_bytes(w) -> int:
    from ninfer.quant import gpu

    if w.packing == "tiles16":
        s, z = gpu.tile_params(w)
        return w.qweight.numel() + s.numel() * 4 + (0 if z is None else z.numel() * 2)
    return w.qweight.numel() + w.scales.numel() * 8  # float32 scale and offset


POWER_S = 0.0  # --power: seconds of graph replays a GEMV row also runs while nvidia-smi samples clock and power


def power_sample(g, seconds: float) -> str:
    """Replay graph g for `seconds` while nvidia-smi samples every 50 ms: 'SM MHz median, W median, event reasons'."""
    import subprocess

    q = "clocks.sm,power.draw,clocks_event_reasons.active"
    try:
        p = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "50"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError as e:
        return f"no nvidia-smi ({e})"
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            g.replay()
        torch.cuda.synchronize()
    p.terminate()
    out = p.communicate()[0]
    rows = [r.split(", ") for r in out.strip().splitlines()]
    rows = rows[len(rows) // 4:]  # past the ramp
    try:
        mhz = sorted(float(r[0]) for r in rows)
        watts = sorted(float(r[1]) for r in rows)
    except (ValueError, IndexError):
        return f"unparsed nvidia-smi output {out[:80]!r}"
    reasons = sorted({r[2] for r in rows if len(r) > 2})
    return f"{mhz[len(mhz) // 2]:.0f} MHz, {watts[len(watts) // 2]:.0f} W, reasons {'/'.join(reasons)} ({len(rows)})"


def time_graph(fn, iters=20, tag="") -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm up: compiles kernels, caches scales
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
    sec = (time.perf_counter() - t) / iters
    if POWER_S > 0:
        print(f"  power, {tag} ({sec * 1e3:.3f} ms a replay): {power_sample(g, POWER_S)}", flush=True)
    return sec


def gemv_part(name, bits, dims, layers, bw, widths):
    from ninfer.quant import gpu

    shapes = layer_shapes(*dims) * layers
    ws = [random_quant(n, k, bits) for n, k in shapes]
    xs = {t: {k: torch.randn(t, k, device="cuda", dtype=ACT_DTYPE) for _, k in shapes} for t in widths}
    rows = []
    gpu.TILE_BITS = set()
    for t in widths if QGEMV else ():
        sec = time_graph(lambda t=t: [gpu.quant_linear(xs[t][w.in_features], w) for w in ws])
        rows.append(("qgemv (CUDA cores, before)", t, sec, sum(read_bytes(w) for w in ws)))
    gpu.TILE_BITS = {4, 8}
    for w in ws:
        gpu.prepare(w)
    for label in QMMA_VARIANTS:
        variant(label)
        for t in widths:
            sec = time_graph(lambda t=t: [gpu.quant_linear(xs[t][w.in_features], w) for w in ws],
                             tag=f"{name} {label} {t}")
            rows.append((label, t, sec, sum(read_bytes(w) for w in ws)))
    variant("")
    ws.clear()
    torch.cuda.empty_cache()
    dense = [torch.randn(n, k, device="cuda", dtype=ACT_DTYPE) * 0.02 for n, k in shapes]
    for t in widths:
        sec = time_graph(lambda t=t: [torch.nn.functional.linear(xs[t][d.shape[1]], d) for d in dense],
                         tag=f"{name} cuBLAS {t}")
        rows.append((f"{str(ACT_DTYPE)[6:]} cuBLAS (peer)", t, sec, sum(d.numel() * 2 for d in dense)))
    dense.clear()
    torch.cuda.empty_cache()
    for label, t, sec, nbytes in rows:
        gbs = nbytes / sec / 1e9
        print(f"| {name} x{layers} | {label} | {t} | {nbytes / 1e9:.2f} | {sec * 1e3:.3f} | {gbs:.0f} | "
              f"{gbs * 1e9 / bw:.3f} |", flush=True)


def sweep_part(name, bits, dims, bw, target_bytes=1.0e9):
    from ninfer.quant import gpu

    best = {}
    gpu.TILE_BITS = {4, 8}
    for n, k in dict.fromkeys(layer_shapes(*dims)):
        per = n * k * bits // 8
        ws = [gpu.prepare(random_quant(n, k, bits)) for _ in range(max(2, math.ceil(target_bytes / per)))]
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        nbytes = sum(read_bytes(w) for w in ws)
        tiles = -(-n // 16)
        res = {}
        gpu.CONFIG_OVERRIDE.clear()
        res["default"] = nbytes / time_graph(lambda x=x, ws=ws: [gpu.quant_linear(x, w) for w in ws]) / 1e9
        default_w = gpu.mma_warps(tiles, k, bits, x.device)
        for u in (2, 4, 6):
            extra = () if u == 4 else ("-DQM_BENCH_ONLY", f"-DQM_U={u}")
            for wp in (4, 8, 16):
                gpu.CONFIG_OVERRIDE[(n, k, bits)] = (wp, extra)
                res[(wp, u, extra)] = nbytes / time_graph(lambda x=x, ws=ws: [gpu.quant_linear(x, w) for w in ws]) / 1e9
        gpu.CONFIG_OVERRIDE.clear()
        top = max((c for c in res if c != "default"), key=res.get)
        best[(n, k, bits)] = (top[0], top[2])
        cells = " ".join(f"w{c[0]}u{c[1]}={res[c]:.0f}" for c in res if c != "default")
        print(f"| {name} | {n}x{k} | {tiles} | default (w{default_w}u4) {res['default']:.0f} "
              f"({res['default'] * 1e9 / bw:.3f}) | best w{top[0]}u{top[1]} {res[top]:.0f} "
              f"({res[top] * 1e9 / bw:.3f}) | {cells} |", flush=True)
        ws.clear()
        torch.cuda.empty_cache()
    return best


def quant_model(shape: str, layers: int, bits: int, dtype=torch.bfloat16, seed: int = 0, lm_head_bits: int = 0,
                capacity: int = 512 + 128 + 64):
    """(runner, weights) of a random model whose layers' Linears are random grouped-int weights (and lm_head, with
    ``lm_head_bits``: what LLM(quantize_lm_head=...) serves)."""
    import random_model as rm

    from ninfer.config.model import model_config_from_hf
    from ninfer.models.decoder import CausalLM
    from ninfer.ops import DeviceSpec, resolve

    cfg = model_config_from_hf(rm.shape_config(shape, layers))
    model = CausalLM(cfg, resolve("reference", DeviceSpec.of(torch.device("cuda"), dtype)))  # only its slots
    gen = torch.Generator(device="cuda").manual_seed(seed)
    weights = {}
    for path, _, _, shp, kind in rm._targets(model):
        if kind == "linear" and (path.startswith("layers.") or (lm_head_bits and path == "lm_head.weight")):
            weights[path] = random_quant(shp[0], shp[1], bits if path.startswith("layers.") else lm_head_bits)
            continue
        t = torch.empty(shp, dtype=torch.float32, device="cuda")
        mean, std = {"linear": (0, shp[-1] ** -0.5), "embed": (0, 1), "norm": (1, 0.1), "norm_zc": (0, 0.1),
                     "conv": (0, 0.5)}.get(kind, (0, 0.5))
        weights[path] = t.normal_(mean, std, generator=gen).to(dtype)
    del model
    return rm.build(shape, "sm90", "cuda", dtype, capacity, layers=layers, weights=weights)


def decode_speed(runner, ctx=512, new=128) -> float:
    vocab = runner.cfg.vocab_size
    argmax = runner.model.ops.argmax
    prompt = torch.randint(0, vocab, (ctx,), generator=torch.Generator().manual_seed(0)).tolist()
    runner.reset()
    tok = int(argmax(runner.prefill(prompt)[None])[0])
    for _ in range(3):  # the first decode runs eagerly and captures the graph
        tok = int(argmax(runner.decode(tok)[None])[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(new):
        tok = int(argmax(runner.decode(tok)[None])[0])
    plain_tok_s = new / (time.perf_counter() - t0)
    from timing import decode_rates

    tok_s, gpu_tok_s = decode_rates(runner, prompt, new)
    if gpu_tok_s is not None:
        print(f"  decode {tok_s:.1f} tok/s pipelined; plain loop {plain_tok_s:.1f} tok/s; graph replays back to back "
              f"{gpu_tok_s:.1f} tok/s (the plain loop's host gap {(1 / plain_tok_s - 1 / gpu_tok_s) * 1e6:.0f} us a "
              "step)", flush=True)
    return tok_s


def gate_apart(impls):
    """attention_gated as before session 29: paged_attention, then sigmoid_mul's own launch."""
    attention, sigmoid_mul = impls["paged_attention"].fn, impls["sigmoid_mul"].fn

    def attention_gated(q, k_cache, v_cache, block_table, positions, scale, gate, fixed=False):
        return sigmoid_mul(attention(q, k_cache, v_cache, block_table, positions, scale), gate, fixed)

    return attention_gated


def e2e_part(name, bits, shape, layers, bw, tuned, lm_head_bits=0):
    import decode as dec
    from whatif import REMOVED  # ops that launch nothing, by variant part

    from ninfer.engine.cuda_graph import CudaGraphs
    from ninfer.quant import gpu
    from ninfer.quant.layout import QuantWeight

    gpu.TILE_BITS = set()
    runner, weights = quant_model(shape, layers, bits, dtype=ACT_DTYPE, lm_head_bits=lm_head_bits)
    quant = [w for w in weights.values() if isinstance(w, QuantWeight)]
    head = f", lm_head int{lm_head_bits}" if lm_head_bits else ""
    dense = sum(t.numel() * t.element_size() for p, t in weights.items()
                if isinstance(t, torch.Tensor) and p != "embed_tokens")
    other = dec.step_bytes(runner, {}, 512 + 64)  # KV at the mean context + recurrent state
    results = []
    labels = (("qgemv (CUDA cores)",) if QGEMV else ()) + tuple(QMMA_VARIANTS) + (
        ("qmma per tile, sweep's best per shape",) if tuned else ())
    for label in labels:
        if not label.startswith("qgemv") and not gpu.TILE_BITS:
            gpu.TILE_BITS = {4, 8}
            for w in quant:
                gpu.prepare(w)
        if "best" in label:
            if not tuned:
                continue
            gpu.CONFIG_OVERRIDE.update(tuned)
        variant(label)
        impls = runner.model.ops.impls
        removed = [pair for part in VARIANTS.get(label, {}).get("remove", ()) for pair in REMOVED[part]]
        if VARIANTS.get(label, {}).get("gate_apart"):  # the output gate in its own launch after attention
            removed.append(("attention_gated", gate_apart(impls)))
        kept = {op: impls[op] for op, _ in removed}
        for op, fn in removed:
            impls[op] = dataclasses.replace(impls[op], fn=fn)
        runner.graphs = CudaGraphs(runner)  # fresh captures for this configuration
        for layer in runner.model.layers:  # the norms' fixed-point form is planned again (gpu.QMV1F may differ)
            layer.fixed_planned = False
        runner.model.fixed_planned = False  # (the final norm's, for lm_head)
        tok_s = decode_speed(runner)
        impls.update(kept)
        gpu.CONFIG_OVERRIDE.clear()
        variant("")
        nbytes = sum(read_bytes(w) for w in quant) + dense + other
        results.append((label, tok_s, nbytes))
        print(f"| {name} | {layers} | {label}{head} | {tok_s:.1f} | {nbytes / 1e9:.2f} | {nbytes * tok_s / bw:.3f} | "
              f"{tok_s * layers / SHAPES[name][5]:.1f} |" if layers != SHAPES[name][5] else
              f"| {name} | {layers} | {label}{head} | {tok_s:.1f} | {nbytes / 1e9:.2f} | {nbytes * tok_s / bw:.3f} | - |",
              flush=True)
    del runner, weights, quant
    torch.cuda.empty_cache()
    return results


def prefill_part(name, bits, shape, layers, ctx, flops, repeats=3, lm_head_bits=0, packing="tiles16"):
    """Prefill of ``ctx`` tokens of the quantised model from an empty cache (median of ``repeats`` after a warm-up), its
    weights dequantised for cuBLAS by one kernel (gpu.dequantize_dense, the default: ``qdeq_*`` for the tiled packing,
    ``qdeqr_*`` for row packing, which sm_75 and GGUF mins keep) and by ``layout.dequantize``'s torch ops (before),
    same process and weights; the fraction is of the dense bf16 matmul rate measured here."""
    from ninfer.quant import gpu
    from ninfer.quant.layout import QuantWeight, dequantize

    gpu.TILE_BITS = {4, 8} if packing == "tiles16" else set()
    runner, weights = quant_model(shape, layers, bits, lm_head_bits=lm_head_bits, capacity=ctx + 64)
    for w in weights.values():
        if isinstance(w, QuantWeight):
            gpu.prepare(w)
            assert w.packing == packing
    cfg = runner.cfg
    params = sum(w.scales.shape[0] * w.in_features if isinstance(w, QuantWeight) else w.numel()
                 for p, w in weights.items() if p not in ("embed_tokens", "lm_head.weight"))
    fl = 2.0 * params * ctx + len(cfg.attention_layers) * 2 * ctx * ctx * cfg.num_heads * cfg.head_dim
    prompt = torch.randint(0, cfg.vocab_size, (ctx,), generator=torch.Generator().manual_seed(0)).tolist()
    kernel = gpu.dequantize_dense
    k_label = "qdeq kernel (default)" if packing == "tiles16" else "row packing: qdeqr kernel (default)"
    t_label = "torch dequantise (before)" if packing == "tiles16" else "row packing: torch dequantise (before)"
    for label, fn in ((k_label, kernel), (t_label, dequantize), (k_label, kernel)):
        gpu.dequantize_dense = fn
        try:
            runner.reset()
            runner.prefill(prompt)  # warm-up: compiles, cuBLAS plans
            times = []
            for _ in range(repeats):
                runner.reset()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                runner.prefill(prompt)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        finally:
            gpu.dequantize_dense = kernel
        t = sorted(times)[len(times) // 2]
        print(f"| {name} | {layers} | {label} | {ctx} | {ctx / t:.0f} ({ctx / max(times):.0f}-{ctx / min(times):.0f}) | "
              f"{fl / t / flops:.2f} |", flush=True)
    del runner, weights
    torch.cuda.empty_cache()


def profile_part(name, bits, shape, layers, steps=5):
    """Kernel time per eager decode step (CUDA graphs off) of the quantised model, grouped by kernel."""
    from timing import decode_kernel_times

    from ninfer.quant import gpu

    os.environ["NINFER_CUDA_GRAPHS"] = "0"
    gpu.TILE_BITS = {4, 8}  # the launcher's default dispatch
    runner, weights = quant_model(shape, layers, bits)
    for w in weights.values():
        if not isinstance(w, torch.Tensor):
            gpu.prepare(w)
    vocab = runner.cfg.vocab_size
    argmax = runner.model.ops.argmax
    runner.reset()
    tok = int(argmax(runner.prefill(torch.randint(0, vocab, (512,)).tolist())[None])[0])
    total, count = decode_kernel_times(runner, tok, steps)
    all_us = sum(total.values()) / steps
    print(f"{name} x{layers} layers (eager, ctx 512): {all_us:.0f} us of kernels per step "
          f"({sum(count.values()) / steps:.0f} kernels)", flush=True)
    for key, us in sorted(total.items(), key=lambda kv: -kv[1])[:16]:
        n = count[key] / steps
        print(f"  {key:60s} {us / steps:8.1f} us {n:6.1f} calls {us / steps / all_us:6.1%}", flush=True)
    os.environ["NINFER_CUDA_GRAPHS"] = "1"
    del runner, weights
    torch.cuda.empty_cache()


def guarded(what: str, fn, *args, **kw):
    """One part of one model: a failure prints one line and frees the GPU memory, so it does not hide the others."""
    try:
        return fn(*args, **kw)
    except Exception as e:
        print(f"FAILED {what}: {type(e).__name__}: {str(e)[:400]}", flush=True)
        torch.cuda.empty_cache()
        return None


def main():
    import decode as dec

    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16, help="layers in the GEMV-only graph")
    ap.add_argument("--e2e-layers", default="27B W4A16 g128=64,8B W8A16 g128=32")
    ap.add_argument("--parts", default="gemv,sweep,e2e")
    ap.add_argument("--widths", default="1,4,8,16")
    ap.add_argument("--models", default=",".join(SHAPES))
    ap.add_argument("--profile-layers", type=int, default=8)
    ap.add_argument("--prefill-ctx", type=int, default=8192, help="prefill: prompt tokens")
    ap.add_argument("--prefill-packing", default="tiles16", help="prefill: the weights' packings, comma-separated "
                    "(tiles16: the tensor-core kernels' tiles, where they serve; rows: what sm_75 and GGUF mins keep)")
    ap.add_argument("--tuned", default=None, help="JSON file: the sweep writes its best configs, e2e reads them")
    ap.add_argument("--variants", default=None, help="';'-separated labels of VARIANTS for the gemv and e2e A/B")
    ap.add_argument("--no-qgemv", action="store_true", help="leave the CUDA-core kernel out")
    ap.add_argument("--lm-head", default="none", help="e2e: 'int8' / 'int4' quantises lm_head too (random codes), "
                    "as LLM(quantize_lm_head=...) serves it; several, comma-separated, run one after another")
    ap.add_argument("--act-dtype", default="bf16", choices=("bf16", "fp16"),
                    help="gemv and e2e: the activations' (the model's) dtype")
    ap.add_argument("--power", type=float, default=0.0, help="gemv: also replay each row's graph this many seconds "
                    "while nvidia-smi samples the SM clock, the power and the clock event reasons")
    a = ap.parse_args()
    global QMMA_VARIANTS, QGEMV, ACT_DTYPE, POWER_S
    POWER_S = a.power
    ACT_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.act_dtype]
    if a.variants:
        QMMA_VARIANTS = tuple(v.strip() for v in a.variants.split(";"))
        unknown = [v for v in QMMA_VARIANTS if v not in VARIANTS]
        if unknown:
            raise SystemExit(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    QGEMV = not a.no_qgemv
    parts = a.parts.split(",")
    bw = dec.copy_bandwidth()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s",
          flush=True)
    models = a.models.split(",")
    if "gemv" in parts:
        print("| model | kernel | tokens | GB read | ms | GB/s | of copy bw |\n|---|---|---|---|---|---|---|")
        for name in models:
            bits, *dims, _, _ = SHAPES[name]
            guarded(f"gemv {name}", gemv_part, name, bits, dims, a.layers, bw, [int(w) for w in a.widths.split(",")])
    tuned = {}
    if "sweep" in parts:
        print("| model | N x K | tiles | default GB/s (of copy) | best | all (w = warps/tile, u = loads/lane) |\n"
              "|---|---|---|---|---|---|")
        for name in models:
            bits, *dims, _, _ = SHAPES[name]
            best = guarded(f"sweep {name}", sweep_part, name, bits, dims, bw)
            if best is not None:
                tuned[name] = best
    if a.tuned and "sweep" in parts:
        with open(a.tuned, "w") as f:
            json.dump({m: [[list(key), cfg[0], list(cfg[1])] for key, cfg in t.items()] for m, t in tuned.items()}, f)
    elif a.tuned and os.path.exists(a.tuned):
        with open(a.tuned) as f:
            tuned = {m: {tuple(key): (wp, tuple(extra)) for key, wp, extra in t} for m, t in json.load(f).items()}
    lay = dict(kv.split("=") for kv in a.e2e_layers.split(","))  # layers of the prefill and e2e models
    if "prefill" in parts:
        flops = dec.matmul_rate()
        print(f"bf16 matmul {flops / 1e12:.0f} TFLOP/s (8192^3, median of 10)\n"
              "| model | layers | dequantisation | ctx | prefill tok/s (range) | of bf16 matmul |\n|---|---|---|---|---|---|")
        for name in (m for m in models if m in lay):
            bits, *_, shape = SHAPES[name]
            for packing in a.prefill_packing.split(","):
                guarded(f"prefill {name} {packing}", prefill_part, name, bits, shape, int(lay[name]), a.prefill_ctx,
                        flops, lm_head_bits={"int8": 8, "int4": 4}.get(a.lm_head.split(",")[0], 0), packing=packing)
    if "profile" in parts:
        for name in models:
            bits, *_, shape = SHAPES[name]
            guarded(f"profile {name}", profile_part, name, bits, shape, a.profile_layers)
    if "e2e" in parts:
        print("| model | layers | GEMV | decode tok/s | step GB | of copy bw | scaled to all layers |\n"
              "|---|---|---|---|---|---|---|")
        for name in (m for m in models if m in lay):
            bits, *_, shape = SHAPES[name]
            for head in a.lm_head.split(","):
                guarded(f"e2e {name}", e2e_part, name, bits, shape, int(lay[name]), bw, tuned.get(name, {}),
                        {"none": 0, "int8": 8, "int4": 4}[head.strip()])


if __name__ == "__main__":
    main()
