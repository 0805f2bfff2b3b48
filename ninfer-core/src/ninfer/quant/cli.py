"""``ninfer quantize`` and ``ninfer eval ppl``."""

from __future__ import annotations

import click

from ..cli import _CONTEXT, LM_HEAD_CHOICES, kv_label, lm_head_format, read_text

KV_CHOICES = ("bf16", "int8", "int4", "int4_norot")


@click.command()
@click.argument("src")
@click.argument("dst")
@click.option("--bits", type=click.Choice(["8", "4"]), default="4", show_default=True)
@click.option("--group-size", type=click.Choice(["32", "64", "128"]), default="128", show_default=True)
@click.option("--method", type=click.Choice(["rtn", "clip", "round", "gptq"]), default="rtn", show_default=True,
              help="rtn: round to nearest, nothing clipped; clip: round to nearest with each group's scale searched "
                   "for the least activation-weighted error (needs --calibration; ~40 s for 135M on two CPU cores); round: clip, then each "
                   "decoder block's rounding and group scales tuned by signed gradient descent to match the float "
                   "block's output on the calibration text (AutoRound-style; needs --calibration; ~10 min on one "
                   "CPU core for a 135M model; the closest to the float model at int4 on SmolLM2, bench/RESULTS.md); "
                   "gptq: error-compensating, needs --calibration.")
@click.option("--iters", type=int, default=50, show_default=True, help="--method round: steps per decoder block.")
@click.option("--windows", type=int, default=16, show_default=True,
              help="--method round: calibration windows of 256 tokens (from the start of the text).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="--method round: seed of the windows drawn for each step.")
@click.option("--e2e-steps", type=int, default=0, show_default=True,
              help="--method round: steps of a final end-to-end stage that tunes every block's rounding and scales "
                   "jointly on KL(float model || quantised model) over the calibration windows, early-stopped on "
                   "the --e2e-holdout windows that follow them in the calibration text (0: none).")
@click.option("--e2e-lr", type=float, default=0.002, show_default=True, help="--method round: end-to-end step size.")
@click.option("--e2e-holdout", type=int, default=3, show_default=True,
              help="--method round: calibration windows held out to judge the end-to-end stage.")
@click.option("--e2e-windows", type=int, default=None,
              help="--method round: windows of 256 tokens that train the end-to-end stage (default: --windows).")
@click.option("--e2e-calibration", type=click.Path(exists=True, dir_okay=False), default=None,
              help="--method round: another text for the end-to-end stage (its first --e2e-windows windows train it, the "
                   "--e2e-holdout after them judge it); default: the --calibration text.")
@click.option("--tune-steps", type=int, default=0, show_default=True,
              help="After any --method: steps of Adam that tune every group's scale and every RMSNorm weight end to end "
                   "on KL(float model || quantised model) over --tune-windows windows of 256 calibration tokens, the "
                   "codes kept (needs --calibration; early-stopped on the --tune-holdout windows after them; on "
                   "SmolLM2 int4 g128, 15 steps cut clip's KL on held-out text by 41%, bench/RESULTS.md). 0: none.")
@click.option("--tune-windows", type=int, default=16, show_default=True,
              help="--tune-steps: calibration windows of 256 tokens that train the tuning.")
@click.option("--tune-holdout", type=int, default=3, show_default=True,
              help="--tune-steps: the calibration windows after those, held out to judge it.")
@click.option("--asymmetric", is_flag=True, help="Integer zero points per group (default: symmetric). With --method "
              "round: the zero points of the asymmetric clip search, rounding and scales learned.")
@click.option("--dtype", type=click.Choice(["bfloat16", "float16"]), default="bfloat16", show_default=True,
              help="Dtype of scales and of the tensors kept dense.")
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Text file whose tokens calibrate --method clip / gptq (never the text you evaluate on).")
def quantize(src, dst, bits, group_size, method, asymmetric, dtype, calibration, iters, windows, seed, e2e_steps,
             e2e_lr, e2e_holdout, e2e_windows, e2e_calibration, tune_steps, tune_windows, tune_holdout):
    """Quantise SRC (HF directory or .gguf) into a compressed-tensors checkpoint DST."""
    import torch

    from ..errors import NinferError
    from .quantize import quantize_checkpoint

    ids = None
    if tune_steps < 0 or tune_windows < 1 or tune_holdout < 1:
        raise NinferError("--tune-steps must be >= 0, and --tune-windows and --tune-holdout >= 1.")
    if method in ("gptq", "clip", "round") or tune_steps:
        if calibration is None:
            what = f"--method {method}" if method != "rtn" else "--tune-steps"
            raise NinferError(f"{what} needs --calibration FILE (a few thousand tokens of typical text).")
        ids = read_text(calibration, "--calibration")
    e2e_text = None
    if e2e_calibration is not None:
        e2e_text = read_text(e2e_calibration, "--e2e-calibration")
    qcfg = quantize_checkpoint(src, dst, int(bits), int(group_size), method, not asymmetric, getattr(torch, dtype),
                               calibration=ids, round_options={"iters": iters, "windows": windows, "seed": seed,
                                              "e2e_steps": e2e_steps, "e2e_lr": e2e_lr, "e2e_holdout": e2e_holdout,
                                              "e2e_calibration": e2e_text, "e2e_windows": e2e_windows},
                               tune_options={"steps": tune_steps, "windows": tune_windows, "holdout": tune_holdout,
                                             "seed": seed})
    sizes = sorted({g["weights"]["group_size"] for g in qcfg["config_groups"].values()}, reverse=True)
    click.echo(f"wrote {dst}: int{bits}, groups of {'/'.join(map(str, sizes))}, "
               f"{'asymmetric' if asymmetric else 'symmetric'} ({method}{', tuned' if tune_steps else ''}); kept dense: "
               f"{', '.join(qcfg['ignore'][:4])}{' ...' if len(qcfg['ignore']) > 4 else ''}", err=True)


@click.group(name="eval")
def eval_group():
    """Accuracy checks."""


@eval_group.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "-m", default=None, help="HF model directory or .gguf file (default: SmolLM2-135M).")
@click.option("--backend", default="auto", show_default=True)
@click.option("--kv-cache", default="bf16", show_default=True,
              help=f"KV format, or several comma-separated (auto, {', '.join(KV_CHOICES)}) for a table from one load.")
@click.option("--max-context", type=_CONTEXT, default=None, help="Context to reserve, or auto (as run takes it).")
@click.option("--lm-head", type=click.Choice(LM_HEAD_CHOICES), default="dense", show_default=True,
              help="lm_head as stored, or grouped int8 / int4 at load (LLM(quantize_lm_head=...)).")
def ppl(file, model, backend, kv_cache, max_context, lm_head):
    """Perplexity of the text in FILE."""
    from ..errors import NinferError
    from ..llm import LLM
    from .evaluate import kv_format

    formats = [{"auto": "bf16"}.get(f.strip(), f.strip()) for f in kv_cache.split(",") if f.strip()]
    bad = [f for f in formats if f not in KV_CHOICES]
    if bad or not formats:
        raise NinferError(f"--kv-cache {kv_cache!r} is not a list of auto, {', '.join(KV_CHOICES)}.")
    text = read_text(file, "ninfer eval ppl")
    llm = LLM(model=model, backend=backend, max_context=max_context, kv_cache=formats[0],
              quantize_lm_head=lm_head_format(lm_head))
    n = len(llm.tokenizer.encode(text))
    for fmt in formats:
        if fmt == formats[0]:
            value = llm.perplexity(text)
        else:
            with kv_format(llm, fmt):
                value = llm.perplexity(text)
        head = "" if lm_head == "dense" else f"  lm_head={lm_head}"
        click.echo(f"{llm.model_name}  kv={kv_label(fmt, llm.dtype):10s}{head}  tokens={n}  perplexity={value:.4f}")
