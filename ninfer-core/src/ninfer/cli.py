"""The ``ninfer`` command line. Packages add commands through ``ninfer_register_commands``."""

from __future__ import annotations

import json
import os
import sys

import click

from .errors import NinferError

LM_HEAD_CHOICES = ("dense", "int8", "int4")  # dense: as the checkpoint stores it; else LLM(quantize_lm_head=...)


def read_text(path: str, what: str) -> str:
    """A UTF-8 text file's contents for ``what`` (e.g. "--calibration"); anything else is one clear error."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise NinferError(f"{path} is not UTF-8 text; {what} takes a plain text file.") from None
    except OSError as e:
        raise NinferError(f"Cannot read {path} ({e.strerror}); {what} takes a readable text file.") from None
    if not text.strip():
        raise NinferError(f"{path} is empty; {what} needs some text.")
    return text


def lm_head_format(choice: str) -> str | None:
    """A --lm-head choice as LLM's quantize_lm_head (None: dense)."""
    return None if choice == "dense" else choice


def load_options(f):
    """What every command that loads a model takes (``ninfer serve`` too): the model, backend, context, KV and
    lm_head formats. The two formats reach ``LLM`` through ``load_llm`` without new parameters."""
    f = click.option("--lm-head", type=click.Choice(LM_HEAD_CHOICES), default="dense",
                     expose_value=False, callback=_remember,
                     help="lm_head as the checkpoint stores it (dense), or grouped int8 / int4 (group 128) at "
                          "load: int8 halves the largest matrix a 27B W4A16 decode step reads, for -0.09% perplexity "
                          "on SmolLM2 (int4: +13%; bench/RESULTS.md). For GPUs: the CPU's reference path "
                          "dequantises it every step, slower than dense.")(f)
    f = click.option("--kv-cache", type=click.Choice(["auto", "bf16", "int8", "int4"]), default="auto",
                     expose_value=False, callback=_remember, help="KV cache format.")(f)
    f = click.option("--max-context", type=_CONTEXT, default=None,
                     help="Context length to reserve KV cache for, or auto: the longest that fits the GPU.")(f)
    f = click.option("--backend", default="auto", show_default=True, help="Backend name, or auto.")(f)
    f = click.option("--model", "-m", default=None, help="HF model directory or .gguf file (default: SmolLM2-135M).")(f)
    return f


def model_options(f):
    f = click.option("--seed", type=int, default=None, help="Random seed for sampling.")(f)
    f = click.option("--temperature", type=float, default=0.0, show_default=True, help="0 is greedy.")(f)
    f = click.option("--max-tokens", type=int, default=256, show_default=True)(f)
    return load_options(f)


def _remember(ctx, param, value):  # options every command shares reach LLM without new parameters
    ctx.meta[f"ninfer.{param.name}"] = value
    return value


class _ContextLength(click.ParamType):
    name = "tokens|auto"

    def convert(self, value, param, ctx):
        if value is None or value == "auto" or isinstance(value, int):
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r} is not a number of tokens or auto", param, ctx)


_CONTEXT = _ContextLength()


def load_llm(model, backend, max_context, **kw):
    """``LLM`` with the command line's options (load_options), inside a click command."""
    from .llm import LLM

    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx else {}
    return LLM(model=model, backend=backend, max_context=max_context, kv_cache=meta.get("ninfer.kv_cache", "auto"),
               quantize_lm_head=lm_head_format(meta.get("ninfer.lm_head", "dense")), **kw)


def describe_formats(llm) -> str:
    """'<KV format> KV, lm_head <format>', read from the loaded model (what runs, not what was asked)."""
    from .quant.layout import QuantWeight

    w = llm.model.lm_head.weight
    head = f"int{w.bits}" if isinstance(w, QuantWeight) else str(w.dtype).replace("torch.", "")
    return f"{kv_label(llm.kv_cache, llm.dtype)} KV, lm_head {head}"


@click.group()
@click.version_option(package_name="ninfer-core")
def cli():
    """ninfer: fast LLM inference on one GPU (or the CPU)."""


@cli.command()
@click.argument("prompt")
@model_options
@click.option("--top-p", type=float, default=1.0)
@click.option("--top-k", type=int, default=0)
@click.option("--raw", is_flag=True, help="Send the prompt as is, without the chat template.")
@click.option("--system", default=None, help="System message.")
@click.option("--draft", default=None, help='Speculative drafters, e.g. "lookup", "mtp:3", "dflash+lookup:16".')
def run(prompt, model, backend, max_context, max_tokens, temperature, seed, top_p, top_k, raw, system, draft):
    """Answer PROMPT; the answer goes to stdout, timings to stderr."""
    from .config.sampling import SamplingParams

    # the options are checked before the model loads (minutes for a 27B), not after
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed, top_p=top_p, top_k=top_k)
    llm = load_llm(model, backend, max_context, draft=draft)
    click.echo(f"loaded {llm.model_name} on {llm.device} ({llm.backend}) in {llm.load_seconds:.1f}s; "
               f"context {llm.max_context} tokens, {describe_formats(llm)}", err=True)
    if raw:
        text = prompt
    else:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        text = llm.render_chat(msgs)
    stats = None
    for c in llm.generate_stream(text, params):
        sys.stdout.write(c.text)
        sys.stdout.flush()
        stats = c.stats or stats
    sys.stdout.write("\n")
    _print_stats(stats)


def kv_label(fmt: str, dtype) -> str:
    """The KV format ``fmt`` as stored: "bf16" names the model's own dtype ``dtype`` (float32 on the CPU)."""
    return str(dtype).replace("torch.", "") if fmt == "bf16" else fmt


def _print_stats(s):
    if not s:
        return
    decode = f"{s['decode_tok_s']:.1f} tok/s" if s["generated_tokens"] > 1 else "n/a (one token)"
    line = (f"prompt {s['prompt_tokens']} tok, prefill {s['prefill_tok_s']:.1f} tok/s; generated "
            f"{s['generated_tokens']} tok, decode {decode}")
    if s.get("drafted_tokens"):
        steps = max(s["verify_steps"], 1)
        line += (f"; {s['generated_tokens'] / steps:.2f} tok/step, acceptance "
                 f"{s['accepted_tokens'] / max(s['drafted_tokens'], 1):.0%}")
    click.echo(line, err=True)


@cli.command()
@model_options
@click.option("--system", default=None, help="System message.")
def chat(model, backend, max_context, max_tokens, temperature, seed, system):
    """Interactive chat that keeps the conversation. Ctrl-C stops a reply, /clear forgets the conversation,
    /exit or Ctrl-D ends it; the oldest turns make way when the conversation outgrows the context."""
    import signal
    import threading

    from .config.sampling import SamplingParams

    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed)
    llm = load_llm(model, backend, max_context)
    head = [{"role": "system", "content": system}] if system else []
    turns: list[dict] = []
    tty = sys.stdin.isatty()
    click.echo(f"ninfer chat with {llm.model_name} ({llm.backend}); Ctrl-C stops a reply, /clear forgets, "
               "/exit quits", err=True)
    while True:
        try:
            line = input(">>> " if tty else "")
        except EOFError:
            break
        except KeyboardInterrupt:
            click.echo("\n(Ctrl-D or /exit quits)", err=True)
            continue
        if line.strip() in ("/exit", "/quit"):
            break
        if line.strip() == "/clear":
            turns = []
            click.echo("(conversation cleared)", err=True)
            continue
        if not line.strip():
            continue
        turns.append({"role": "user", "content": line})
        ids, dropped = _fit_chat(llm, head, turns)
        if ids is None:
            turns.pop()
            click.echo(f"(that message alone does not fit the context of {llm.max_context} tokens; send a shorter "
                       "one, or restart with a larger --max-context)", err=True)
            continue
        if dropped:
            turns = turns[dropped:]
            click.echo(f"(the oldest {dropped} messages made way for the context of {llm.max_context} tokens)",
                       err=True)
        pieces, stats, finish, cancel = [], None, None, threading.Event()
        # Ctrl-C asks the engine to stop at its next step (a KeyboardInterrupt inside a decode step could leave
        # its caches half written); a second Ctrl-C while it stops is ignored
        previous = signal.signal(signal.SIGINT, lambda *_, stop=cancel: stop.set())
        try:
            for c in llm.generate_stream(ids, params, cancel=cancel):
                sys.stdout.write(c.text)
                sys.stdout.flush()
                pieces.append(c.text)
                stats, finish = c.stats or stats, c.finish_reason or finish
        finally:
            signal.signal(signal.SIGINT, previous)
        sys.stdout.write("\n")
        turns.append({"role": "assistant", "content": "".join(pieces)})
        if finish == "cancelled":
            click.echo("(stopped)", err=True)
        elif finish == "length":
            why = "--max-tokens" if stats and stats.get("generated_tokens", 0) >= max_tokens else "the context"
            click.echo(f"(cut off: the reply reached {why})", err=True)
        _print_stats(stats)


def _fit_chat(llm, head: list[dict], turns: list[dict]) -> tuple[list[int] | None, int]:
    """The prompt's tokens with the fewest oldest messages dropped (whole user / assistant pairs, the system
    message kept) so that at least some reply fits; (None, 0) when the last message alone does not."""
    dropped = 0
    while dropped < len(turns):
        ids = llm.tokenizer.encode(llm.render_chat(head + turns[dropped:]))
        if len(ids) < llm.max_context - 1:
            return ids, dropped
        dropped += 2 if dropped + 2 < len(turns) else 1
    return None, 0


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--explain", is_flag=True, help="Show which implementation serves each op here.")
def backends(as_json, explain):
    """Installed backends, whether each can run here and why, and what auto picks."""
    import torch

    from .backends import backend_statuses, choose_backend, default_device
    from .ops import DeviceSpec, resolve

    dev = default_device()
    sts = backend_statuses(dev)
    auto, why = choose_backend("auto", dev)
    ops = None
    if explain:
        dtype = torch.float32 if dev.type == "cpu" else torch.bfloat16
        ops = resolve(auto, DeviceSpec.of(dev, dtype)).explain()
    if as_json:
        out = {"device": str(dev), "backends": [s.as_dict() for s in sts], "auto": {"name": auto, "why": why}}
        if ops is not None:
            out["ops"] = ops
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"device: {dev}" + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""))
    for s in sts:
        mark = "yes" if s.can_run else "no "
        click.echo(f"  {s.name:10s} {mark}  {s.why}")
    click.echo(f"auto: {why}")
    if ops is not None:
        click.echo("ops:")
        for op, impl in ops.items():
            click.echo(f"  {op:20s} {impl}")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
def plugins(as_json):
    """Loaded plugins with distribution, version and hooks."""
    from .plugins import list_plugins

    items = list_plugins()
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    for p in items:
        status = f"  BROKEN: {p['error']}" if p.get("error") else ""
        click.echo(f"{p['name']} ({p['distribution']} {p['version']}): {', '.join(p['hooks'])}{status}")


@cli.command()
@load_options
@click.option("--prompt-tokens", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--new-tokens", type=click.IntRange(min=2), default=64, show_default=True,
              help="Tokens to generate (at least 2: decode speed is timed from the first new token on).")
@click.option("--peer", type=click.Choice(["none", "transformers"]), default="none", show_default=True,
              help="Also measure a peer on the same model in the same process.")
@click.option("--json", "as_json", is_flag=True)
def bench(model, backend, max_context, prompt_tokens, new_tokens, peer, as_json):
    """Prefill and decode tok/s for fixed lengths (random prompt tokens, greedy, EOS ignored)."""
    from .bench import run_bench

    llm = load_llm(model, backend, max_context, progress=False)
    res = run_bench(model, backend, max_context, prompt_tokens, new_tokens, peer, llm=llm)
    res["formats"] = describe_formats(llm)  # ninfer's; a peer runs the checkpoint as stored
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    for r in res["runs"]:
        click.echo(f"{r['engine']:14s} prefill {r['prefill_tok_s']:9.1f} tok/s   decode {r['decode_tok_s']:8.1f} tok/s"
                   f"   ({r['prompt_tokens']} prompt, {r['new_tokens']} new, {res['device']}"
                   + (f", {res['formats']})" if r["engine"].startswith("ninfer") else ")"))


@cli.command()
@click.argument("model", required=False)
@click.option("--json", "as_json", is_flag=True)
def info(model, as_json):
    """What a checkpoint needs before loading it: weights, KV per token, state per sequence."""
    from .memory import memory_report

    rep = memory_report(model)
    if as_json:
        click.echo(json.dumps(rep, indent=2))
        return
    width = max(len(k) for k in rep)
    for k, v in rep.items():
        click.echo(f"{k:{width}s}  {v}")


def _add_plugin_commands():
    from .plugins import load_plugins

    pm = load_plugins()
    pm.hook.ninfer_register_commands(cli=cli)
    try:
        from .kernels.cli import kernels

        cli.add_command(kernels)
    except ImportError:
        pass
    from .quant.cli import eval_group, quantize

    cli.add_command(quantize)
    cli.add_command(eval_group)


def main():
    debug = bool(os.environ.get("NINFER_DEBUG"))
    try:
        _add_plugin_commands()
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except NinferError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:
        if debug:
            raise
        click.echo(f"Error: {type(e).__name__}: {e} (this is a bug in ninfer; NINFER_DEBUG=1 shows the traceback).",
                   err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
