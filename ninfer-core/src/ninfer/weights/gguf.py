"""GGUF files (llama.cpp): a Hugging Face config synthesised from metadata, Hugging Face tensor
names, llama's Q/K row permutation undone, and quantised tensors dequantised on read.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np
import torch

from ..errors import NinferError
from . import Checkpoint
from .gguf_file import GGML_TYPES, GGUF_MAGIC, GGUFFile, TensorInfo
from .gguf_quants import dequantize

# GGUF architecture -> (Hugging Face architecture, model_type)
ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}

def _unread_architecture(arch: str, path) -> str:
    """One sentence for a GGUF file whose architecture ninfer does not read from GGUF, naming what to load instead."""
    known = ", ".join(ARCHITECTURES)
    if arch.startswith("qwen35") or arch.startswith("qwen3next"):
        fix = ("for Qwen3.5 / 3.6 (hybrid Gated DeltaNet) load the Hugging Face checkpoint folder instead, or a "
               "compressed-tensors / GPTQ quantisation of it (ninfer quantize writes one)")
    elif "moe" in arch:
        fix = "mixture-of-experts models are not supported by ninfer"
    else:
        fix = "load the model's Hugging Face checkpoint folder, if its architecture is one ninfer supports"
    return f"{path} is a GGUF file of architecture {arch!r}, which ninfer does not read from GGUF ({known}); {fix}."


# llama.cpp block tensor names -> Hugging Face names inside `model.layers.N.`
_BLOCK_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


def hf_tensor_name(gguf_name: str) -> str:
    """`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`; unknown names pass through."""
    m = _BLOCK_RE.match(gguf_name)
    if m:
        layer, part, kind = m.groups()
        if part in _BLOCK_NAMES:
            return f"model.layers.{layer}.{_BLOCK_NAMES[part]}.{kind}"
        return gguf_name
    base, _, kind = gguf_name.rpartition(".")
    if base in _TOP_NAMES:
        return f"{_TOP_NAMES[base]}.{kind}"
    return gguf_name


def unpermute_rows(rows: int, n_head: int) -> torch.Tensor:
    """Row order that undoes llama.cpp's convert-time permute of q_proj/k_proj.

    convert_hf_to_gguf.py reshapes rows as [head, 2, head_dim/2] and swaps the last two axes (so
    rope pairs sit next to each other); the inverse reads rows [head, head_dim/2, 2] and swaps back.
    """
    half = rows // n_head // 2
    return torch.arange(rows).reshape(n_head, half, 2).transpose(1, 2).reshape(-1)  # [rows]


_SHARD_RE = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$")


def _first_shard(path: str) -> str:
    """Any part of a split GGUF (name-00002-of-00003.gguf) opens the set through its first part."""
    m = _SHARD_RE.match(path)
    return f"{m[1]}-00001-of-{m[3]}.gguf" if m and os.path.exists(f"{m[1]}-00001-of-{m[3]}.gguf") else path


def _other_shards(first: GGUFFile) -> list[str]:
    count = int(first.metadata.get("split.count", 1))
    if count <= 1:
        return []
    m = _SHARD_RE.match(first.path)
    paths = [f"{m[1]}-{i:05d}-of-{count:05d}.gguf" for i in range(2, count + 1)] if m else []
    missing = [p for p in paths if not os.path.exists(p)]
    if not m or missing:
        raise NinferError(f"{first.path} is part 1 of a {count}-part GGUF but {missing[0] if missing else 'its parts'} "
                          "is missing; put all parts, named like the first (-0000N-of-...), in one folder.")
    return paths


def llama3_rope_scaling(freq_factors: torch.Tensor, theta: float, rotary_dim: int, original_context: int
                        ) -> dict[str, Any] | None:
    """Hugging Face's llama3 rope_scaling from the `rope_freqs` factors llama.cpp stores instead.

    llama.cpp divides frequency i by factor f_i: 1 at short wavelengths, `factor` at long ones, and
    1 / ((1 - s) / factor + s) between, with s = (original / wavelength - low) / (high - low). s is
    linear in 1 / wavelength, so a line through the in-between entries gives the band; any
    (original, low, high) on that line describes the same frequencies, so `original` is kept as given.
    """
    f = freq_factors.double().flatten()  # [rotary_dim / 2]
    factor = float(f.max())
    inv_freq = theta ** -(torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    between = (f > 1 + 1e-5) & (f < factor * (1 - 1e-5))  # float32 factors: leave rounding noise out
    if factor <= 1 + 1e-5 or int(between.sum()) < 2:
        return None
    s = (1 / f[between] - 1 / factor) / (1 - 1 / factor)
    x = inv_freq[: f.numel()][between] / (2 * math.pi)  # 1 / wavelength
    slope, intercept = np.polyfit(x.numpy(), s.numpy(), 1)
    width = original_context / slope  # high - low
    low = -intercept * width
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": float(low),
            "high_freq_factor": float(low + width), "original_max_position_embeddings": int(original_context)}


class GGUFCheckpoint(Checkpoint):
    name = "gguf"

    @staticmethod
    def can_open(path: str) -> bool:
        try:
            with open(path, "rb") as f:
                return f.read(4) == GGUF_MAGIC
        except OSError:  # directories and unreadable paths belong to other readers
            return False

    @classmethod
    def open(cls, path: str) -> "GGUFCheckpoint":
        return cls(path)

    def __init__(self, path: str):
        self.path = path
        self.file = GGUFFile(_first_shard(path))
        self.metadata: dict[str, Any] = self.file.metadata
        self._file_of: dict[str, GGUFFile] = {}  # GGUF tensor name -> the shard holding it
        for shard in [self.file] + [GGUFFile(p) for p in _other_shards(self.file)]:
            self._file_of.update(dict.fromkeys(shard.tensors, shard))
        self._by_hf = {hf_tensor_name(n): f.tensors[n] for n, f in self._file_of.items()}
        self.config = self._synthesise_config()
        self.generation_config: dict[str, Any] = {}
        template = self.metadata.get("tokenizer.chat_template")
        self.chat_template: str | None = template if isinstance(template, str) else None

    # -- config --------------------------------------------------------------------------------
    def _synthesise_config(self) -> dict[str, Any]:
        md = self.metadata
        arch = md.get("general.architecture", "unknown")
        if arch not in ARCHITECTURES:
            raise NinferError(_unread_architecture(arch, self.path))
        hf_arch, model_type = ARCHITECTURES[arch]

        def key(name, default=None):
            v = md.get(f"{arch}.{name}", default)
            return max(v) if isinstance(v, list) and v else v  # some files store per-layer lists

        hidden, heads = key("embedding_length"), key("attention.head_count")
        tokens = md.get("tokenizer.ggml.tokens")
        embed = self._by_hf.get("model.embed_tokens.weight")
        cfg: dict[str, Any] = {
            "architectures": [hf_arch],
            "model_type": model_type,
            "hidden_size": hidden,
            "intermediate_size": key("feed_forward_length"),
            "num_hidden_layers": key("block_count"),
            "num_attention_heads": heads,
            "num_key_value_heads": key("attention.head_count_kv", heads),
            "head_dim": key("attention.key_length", hidden // heads if hidden and heads else None),
            "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
            "rope_theta": key("rope.freq_base", 10000.0),
            # the embedding's rows, which converters may pad past the token list, are what the model needs
            "vocab_size": key("vocab_size", embed.shape[0] if embed is not None else len(tokens) if tokens else None),
            "max_position_embeddings": key("context_length", 2048),
            "tie_word_embeddings": "lm_head.weight" not in self._by_hf,
            "hidden_act": "silu",
            "attention_bias": "model.layers.0.self_attn.q_proj.bias" in self._by_hf,
            "bos_token_id": md.get("tokenizer.ggml.bos_token_id"),
            "eos_token_id": md.get("tokenizer.ggml.eos_token_id"),
        }
        scaling = key("rope.scaling.type")
        if "rope_freqs.weight" in self._by_hf:  # Llama 3.1+: per-frequency factors stored as a tensor
            rotary_dim = key("rope.dimension_count", cfg["head_dim"])
            cfg["rope_scaling"] = llama3_rope_scaling(self.get("rope_freqs.weight"), cfg["rope_theta"], rotary_dim,
                                                      key("rope.scaling.original_context_length", 8192))
        elif scaling in ("linear", "yarn"):
            cfg["rope_scaling"] = {"rope_type": scaling, "factor": key("rope.scaling.factor", 1.0)}
            if key("rope.scaling.original_context_length"):
                cfg["rope_scaling"]["original_max_position_embeddings"] = key("rope.scaling.original_context_length")
        return cfg

    # -- tensors ---------------------------------------------------------------------------------
    def tensor_names(self) -> list[str]:
        return list(self._by_hf)

    def tensor_info(self, name: str) -> TensorInfo:
        try:
            return self._by_hf[name]
        except KeyError:
            raise NinferError(f"{self.path} has no tensor {name}; the GGUF does not match its architecture "
                              f"{self.config['architectures'][0]}.") from None

    def tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.tensor_info(name).shape

    def tensor_type(self, name: str) -> str:
        """The ggml type the tensor is stored as, e.g. "Q8_0"."""
        return self.tensor_info(name).type_name

    def _row_order(self, name: str, rows: int) -> torch.Tensor | None:
        """llama stores q_proj/k_proj rows permuted for interleaved rope; this undoes it."""
        if ".self_attn.q_proj." in name:
            heads = "num_attention_heads"
        elif ".self_attn.k_proj." in name:
            heads = "num_key_value_heads"
        else:
            return None
        return unpermute_rows(rows, self.config[heads]) if self.config["model_type"] == "llama" else None

    def raw(self, name: str) -> torch.Tensor:
        """The stored (possibly quantised) bytes, uint8 [rows, bytes per row], rows in HF order."""
        info = self.tensor_info(name)
        # copy this one tensor out of the read-only map (torch wants writable memory); never the file
        raw = torch.from_numpy(np.array(self._file_of[info.name].raw_bytes(info)))  # [rows, row_bytes]
        if len(info.shape) == 1:  # vectors (norms, biases) are one row; get() reorders their elements
            return raw
        order = self._row_order(name, raw.shape[0])
        return raw[order] if order is not None else raw

    def get(self, name: str, device: torch.device | str | None = None) -> torch.Tensor:
        """float32 in PyTorch shape. With `device`, the stored bytes (up to 8x smaller than float32) are
        moved first and dequantised there, so a GPU loader never builds the float32 copy on the CPU."""
        info = self.tensor_info(name)
        raw = self.raw(name)
        if device is not None:
            raw = raw.to(device)
        _, _, block_bytes = GGML_TYPES[info.ggml_type]
        out = dequantize(raw, info.type_name, block_bytes, info.shape)
        if len(info.shape) == 1 and (order := self._row_order(name, info.shape[0])) is not None:
            out = out[order.to(out.device)]  # a q/k bias is permuted like the weight's rows
        return out

    # -- tokenizer and chat ----------------------------------------------------------------------
    def tokenizer(self):
        from ..tokenizer import Tokenizer

        return Tokenizer.from_gguf(self.metadata)

    def special_tokens(self) -> dict[str, str | None]:
        tokens = self.metadata.get("tokenizer.ggml.tokens") or []

        def text(key):
            i = self.metadata.get(key)
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

        return {"bos_token": text("tokenizer.ggml.bos_token_id"), "eos_token": text("tokenizer.ggml.eos_token_id")}
