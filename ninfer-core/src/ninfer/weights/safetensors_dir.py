"""Hugging Face model directories: config.json, one or sharded *.safetensors, tokenizer files."""

from __future__ import annotations

import json
import os

import torch
from safetensors import safe_open

from ..errors import NinferError
from . import Checkpoint


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise NinferError(f"{path} is not valid JSON ({e}); restore the file from the model's original source.") from None


class SafetensorsDir(Checkpoint):
    name = "safetensors"

    @staticmethod
    def can_open(path: str) -> bool:
        return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json"))

    @classmethod
    def open(cls, path: str) -> "SafetensorsDir":
        return cls(path)

    def __init__(self, path: str):
        self.path = path
        raw = _read_json(os.path.join(path, "config.json"))
        self.raw_config = raw
        q = raw.get("quantization_config")
        if type(self) is SafetensorsDir and isinstance(q, dict):  # the quantised formats have their own readers
            method = q.get("quant_method") or "an unknown method"
            raise NinferError(f"{path} holds weights quantised with {method}, which ninfer does not read; use the "
                              "model's bf16 checkpoint, a compressed-tensors pack-quantized or GPTQ one, or a GGUF "
                              "(`ninfer quantize` makes a pack-quantized one from the bf16 checkpoint).")
        self.config = flatten_config(raw)
        gen = os.path.join(path, "generation_config.json")
        self.generation_config = _read_json(gen) if os.path.exists(gen) else {}
        self._files: dict[str, str] = {}  # tensor name -> file
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            weight_map = _read_json(index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise NinferError(f"{index} has no weight_map; restore the file from the model's original source.")
            for name, fn in weight_map.items():
                self._files[name] = os.path.join(path, fn)
        else:
            files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
            if not files:
                raise NinferError(f"No *.safetensors files in {path}; ninfer loads safetensors or GGUF only (never pickle).")
            for fn in files:
                for name in self._handle(os.path.join(path, fn)).keys():
                    self._files[name] = os.path.join(path, fn)
        self._tok_cfg = {}
        tc = os.path.join(path, "tokenizer_config.json")
        if os.path.exists(tc):
            self._tok_cfg = _read_json(tc)
        self.chat_template = None
        jinja = os.path.join(path, "chat_template.jinja")
        if os.path.exists(jinja):
            with open(jinja, encoding="utf-8") as f:
                self.chat_template = f.read()
        elif isinstance(self._tok_cfg.get("chat_template"), str):
            self.chat_template = self._tok_cfg["chat_template"]
        elif isinstance(self._tok_cfg.get("chat_template"), list):  # named templates: take "default"
            named = {t["name"]: t["template"] for t in self._tok_cfg["chat_template"]}
            self.chat_template = named.get("default") or next(iter(named.values()), None)

    _handles: dict

    def _handle(self, file: str):
        if not hasattr(self, "_handles"):
            self._handles = {}
        if file not in self._handles:
            if not os.path.exists(file):
                raise NinferError(f"{file} is missing (model.safetensors.index.json names it); download it again.")
            try:
                self._handles[file] = safe_open(file, framework="pt", device="cpu")
            except Exception as e:
                raise NinferError(f"{file} is not a readable safetensors file ({e}); it may be truncated: "
                                  "download it again.") from None
        return self._handles[file]

    def tensor_names(self) -> list[str]:
        return list(self._files)

    def get(self, name: str) -> torch.Tensor:
        file = self._files[name]
        handle = self._handle(file)  # a missing or unreadable file says so itself
        try:
            t = handle.get_tensor(name)
        except Exception as e:
            raise NinferError(f"Cannot read tensor {name} from {file} ({e}); the file may be truncated: "
                              "download it again.") from None
        if t.dtype in _FP8 and type(self) is SafetensorsDir:
            raise NinferError(f"Tensor {name} is stored in {str(t.dtype)[6:]} without a quantization_config ninfer "
                              "reads; use the model's bf16 checkpoint or a pack-quantized one.")
        return t

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._handle(self._files[name]).get_slice(name).get_shape())

    def tokenizer(self):
        from ..tokenizer import Tokenizer

        return Tokenizer.from_hf_dir(self.path)

    def special_tokens(self) -> dict[str, str | None]:
        def text(v):
            return v.get("content") if isinstance(v, dict) else v

        return {"bos_token": text(self._tok_cfg.get("bos_token")), "eos_token": text(self._tok_cfg.get("eos_token"))}


_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
             if hasattr(torch, n))


def flatten_config(raw: dict) -> dict:
    """Published multimodal configs nest the language model under text_config: lift it up."""
    if "text_config" in raw and isinstance(raw["text_config"], dict):
        cfg = dict(raw["text_config"])
        cfg.setdefault("architectures", raw.get("architectures"))
        cfg["outer_model_type"] = raw.get("model_type")
        for k in ("tie_word_embeddings", "eos_token_id", "bos_token_id"):
            if k in raw and k not in cfg:
                cfg[k] = raw[k]
        return cfg
    return dict(raw)
