"""Qwen3.5-27B-shaped hybrid model: ninfer's reference backend beside transformers, same weights.

Builds a random-weight model at the real 27B width (hidden 5120, 24/4 attention heads of 256, GDN
16 key / 48 value heads of 128, SwiGLU 17408, vocab 248320) with a few layers ([GDN x3, attention]
repeated), once in transformers and, from the very same tensors, in ninfer. Compares last-token
logits (relative L2 error, top-1 agreement over every prompt position) and times a 512-token
prefill and greedy decode in the same process. Exits non-zero, with the reason, when anything
fails or the logits disagree beyond bf16 noise.

    python bench/hybrid_reference.py                      # on the GPU, bf16, 4 layers
    python bench/hybrid_reference.py --layers 8
    python bench/hybrid_reference.py --tiny --device cpu  # the same code path on a tiny config
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time

import torch

FULL = dict(hidden_size=5120, intermediate_size=17408, num_attention_heads=24, num_key_value_heads=4,
            head_dim=256, vocab_size=248320, linear_num_key_heads=16, linear_num_value_heads=48,
            linear_key_head_dim=128, linear_value_head_dim=128)
TINY = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            vocab_size=320, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16,
            linear_value_head_dim=16)
MAX_REL_L2 = {torch.bfloat16: 5e-2, torch.float16: 5e-2, torch.float32: 1e-3}  # beyond this: a bug


class StateDictCheckpoint:
    """The transformers model's own tensors, offered through ninfer's Checkpoint interface (no disk)."""

    def __init__(self, model, config: dict):
        self.path, self.config = "<in-memory transformers model>", config
        self._tensors = dict(model.state_dict())

    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._tensors[name].shape)

    def get(self, name: str) -> torch.Tensor:
        return self._tensors[name]


def build_transformers(shape: dict, layers: int, dtype: torch.dtype, device: torch.device, seed: int):
    import transformers

    cfg = transformers.Qwen3_5TextConfig(
        **shape, num_hidden_layers=layers, rms_norm_eps=1e-6, max_position_embeddings=4096,
        tie_word_embeddings=False, eos_token_id=None, pad_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.Qwen3_5ForCausalLM._from_config(cfg, dtype=dtype)
    model = model.to(device).eval()  # a no-op where the device context already placed it
    with torch.no_grad():  # noise on every norm so a (1 + w) mistake would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    raw = cfg.to_dict()
    raw["architectures"] = ["Qwen3_5ForCausalLM"]
    return model, raw


def build_ninfer(hf_model, raw: dict, dtype: torch.dtype, device: torch.device, max_context: int):
    from ninfer.config.model import model_config_from_hf
    from ninfer.engine.runner import ModelRunner
    from ninfer.models import ARCHITECTURES
    from ninfer.models.decoder import CausalLM
    from ninfer.models.loader import load_weights
    from ninfer.ops import DeviceSpec, resolve

    cfg = model_config_from_hf(raw)
    arch = ARCHITECTURES[cfg.architecture]
    ops = resolve("reference", DeviceSpec.of(device, dtype))
    model = CausalLM(cfg, ops)
    load_weights(model, StateDictCheckpoint(hf_model, raw), arch.names, dtype, device, progress=False)
    return ModelRunner(model, cfg, device, dtype, max_context, state_factory=lambda: arch.state_factory(cfg, device))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0


@torch.inference_mode()
def run_ninfer(runner, ids: list[int], steps: int, device):
    runner.reset()
    runner.forward(ids[:16], "prefill")  # warm-up
    runner.reset()
    all_logits, t_prefill = timed(lambda: runner.model.logits(runner.forward(ids, "prefill")), device)
    tokens, token = [], int(all_logits[-1].argmax())

    def decode():
        nonlocal token
        for _ in range(steps):
            tokens.append(token)
            token = int(runner.decode(token).argmax())

    _, t_decode = timed(decode, device)
    return all_logits, tokens, t_prefill, t_decode


def _cache_of(out):
    # transformers renamed past_key_values to cache; the GPU image (5.17) still has the old name
    global _CACHE_ARG
    if getattr(out, "cache", None) is not None:
        _CACHE_ARG = "cache"
        return out.cache
    _CACHE_ARG = "past_key_values"
    return out.past_key_values


_CACHE_ARG = "cache"


@torch.inference_mode()
def run_transformers(model, ids: list[int], steps: int, device):
    x = torch.tensor([ids], device=device)
    model(x[:, :16])  # warm-up
    out, t_prefill = timed(lambda: model(x, use_cache=True), device)
    cache, token = _cache_of(out), int(out.logits[0, -1].argmax())
    tokens = []

    def decode():
        nonlocal token, cache
        for _ in range(steps):
            tokens.append(token)
            o = model(torch.tensor([[token]], device=device), **{_CACHE_ARG: cache}, use_cache=True)
            cache, token = _cache_of(o), int(o.logits[0, -1].argmax())

    _, t_decode = timed(decode, device)
    return out.logits[0].float(), tokens, t_prefill, t_decode


@torch.inference_mode()
def fp32_logits(model, ids: list[int], device) -> torch.Tensor:
    """The same weights run in float32 by transformers: how far is each bf16 run from exact?"""
    import copy

    exact = copy.deepcopy(model).float()
    logits = exact(torch.tensor([ids], device=device)).logits[0].float()
    del exact
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return logits


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4, help="decoder layers, 4-8 ([GDN x3, attention] repeated)")
    ap.add_argument("--prompt", type=int, default=512, help="prefill tokens")
    ap.add_argument("--decode", type=int, default=32, help="greedy decode steps")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="bfloat16 (default on cuda) or float32 (default on cpu)")
    ap.add_argument("--tiny", action="store_true", help="tiny widths: check the script itself, e.g. on the CPU")
    ap.add_argument("--vocab", type=int, default=None, help="override the vocabulary size (a cheaper shape check)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("FAIL: --device cuda but no CUDA GPU is visible to PyTorch")
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    shape = dict(TINY if args.tiny else FULL)
    if args.vocab:
        shape["vocab_size"] = args.vocab

    hf, raw = build_transformers(shape, args.layers, dtype, device, args.seed)
    runner = build_ninfer(hf, raw, dtype, device, args.prompt + args.decode + 16)
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, shape["vocab_size"], (args.prompt,), generator=gen).tolist()

    n_logits, n_tokens, n_pre, n_dec = run_ninfer(runner, ids, args.decode, device)
    t_logits, t_tokens, t_pre, t_dec = run_transformers(hf, ids, args.decode, device)

    for name, lg in (("ninfer", n_logits), ("transformers", t_logits)):
        if not torch.isfinite(lg).all():
            raise SystemExit(f"FAIL: {name} logits contain NaN or inf")
    last_rel, all_rel = rel_l2(n_logits[-1], t_logits[-1]), rel_l2(n_logits, t_logits)
    exact = fp32_logits(hf, ids, device) if dtype != torch.float32 else None
    top1 = float((n_logits.argmax(-1) == t_logits.argmax(-1)).float().mean())
    diverge = next((i for i, (a, b) in enumerate(zip(n_tokens, t_tokens)) if a != b), len(n_tokens))

    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"\nQwen3.5-27B-shaped hybrid, {args.layers} layers {'(tiny widths) ' if args.tiny else ''}"
          f"{raw['layer_types']}, {str(dtype)[6:]} on {gpu}, "
          f"{datetime.date.today()}, commit {commit()}, torch {torch.__version__}\n")
    print("| metric | ninfer reference | transformers |")
    print("|---|---:|---:|")
    print(f"| prefill {args.prompt} tokens (tok/s) | {args.prompt / n_pre:,.0f} | {args.prompt / t_pre:,.0f} |")
    print(f"| decode {args.decode} steps (tok/s) | {args.decode / n_dec:,.1f} | {args.decode / t_dec:,.1f} |")
    print(f"| last-token logits rel. L2 error | {last_rel:.2e} | - |")
    print(f"| all-position logits rel. L2 error | {all_rel:.2e} | - |")
    if exact is not None:
        print(f"| all-position logits rel. L2 error vs fp32 transformers | {rel_l2(n_logits, exact):.2e} "
              f"| {rel_l2(t_logits, exact):.2e} |")
        print(f"| top-1 agreement with fp32 transformers | {(n_logits.argmax(-1) == exact.argmax(-1)).float().mean():.1%} "
              f"| {(t_logits.argmax(-1) == exact.argmax(-1)).float().mean():.1%} |")
    print(f"| top-1 agreement over {args.prompt} positions | {top1:.1%} | - |")
    print(f"| greedy decode steps equal before the first difference | {diverge}/{args.decode} | - |")
    print()
    limit = MAX_REL_L2[dtype]
    if last_rel > limit or all_rel > limit:
        print(f"FAIL: logits differ by relative L2 {max(last_rel, all_rel):.2e} > {limit:.0e}", file=sys.stderr)
        return 1
    print(f"OK: logits agree within {limit:.0e} relative L2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
