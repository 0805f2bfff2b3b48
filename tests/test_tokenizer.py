"""ninfer's tokenizers against transformers' on the same files: the SmolLM2 GGUF, GGUFs that ask for
other pre-tokenizers, and a Hugging Face tokenizer directory."""

from __future__ import annotations

import json
import os

import pytest

from ninfer.chat.template import ChatTemplate
from ninfer.errors import NinferError
from ninfer.tokenizer import Tokenizer
from ninfer.weights.gguf import GGUFCheckpoint

TEXTS = [
    "Hello, world! How are you doing today?",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)  # slow\n",
    "Digits: 0 12 345 6789 3.14159 1,000,000 2024-12-02 x86_64",
    "naïve café — “quotes” emoji: 😀🎉👩‍💻 🇫🇷",
    "日本語のテキストと中文文本，还有한국어。",
    "   leading spaces,\ttabs\t\tand\n\n\nnewlines   \n  trailing   ",
    "I'm sure you're right; they'll see it's THEIR'S.",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "",
]
CONVERSATION = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "What is 17 × 23? Answer with digits: 日本"},
    {"role": "assistant", "content": "391 😀"},
]


def _transformers_tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))


@pytest.fixture(scope="module")
def ours(smollm2_gguf):
    return GGUFCheckpoint.open(smollm2_gguf).tokenizer()


@pytest.fixture(scope="module")
def ref(smollm2_gguf):
    return _transformers_tokenizer(smollm2_gguf)


def test_gguf_tokenizer_equals_transformers(ours, ref):
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == ref.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == ref.decode(ids) == text
        assert ours.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)
    assert ours.vocab_size == len(ref) == 49152
    assert (ours.bos_token_id, ours.bos_token) == (ref.bos_token_id, ref.bos_token)
    assert (ours.eos_token_id, ours.eos_token) == (ref.eos_token_id, ref.eos_token)
    # llama.cpp also ends generation on <|endoftext|>, a control token of this vocabulary
    assert ours.eos_token_ids == {ref.eos_token_id, ref.convert_tokens_to_ids("<|endoftext|>")}
    for i in (0, 1, 2, 100, 4000, 49151):
        assert ours.id_to_token(i) == ref.convert_ids_to_tokens(i)
        assert ours.token_to_id(ours.id_to_token(i)) == i


def test_numeric_symbols_split_like_smollm2_and_llama_cpp(ours, ref):
    """SmolLM2's own tokenizer.json (and llama.cpp's "smollm" pre-tokenizer) split off every \\p{N}
    character before the GPT-2 regex; transformers' GGUF conversion drops that step, which shows
    only on numerals that have byte merges with a preceding space, like " ½". The reference here is
    transformers' vocabulary and merges with the published pre-tokenizer restored."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers

    published = HFTokenizer.from_str(ref.backend_tokenizer.to_str())
    published.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False)])
    for text in TEXTS + ["a ½ cup, x² and ٣ things", " ½"]:
        assert ours.encode(text) == published.encode(text, add_special_tokens=False).ids, text
    assert ours.encode(" ½") == [ours.token_to_id("Ġ"), ours.token_to_id("Â½")]


def test_chat_prompt_tokens_equal_transformers(ours, ref, smollm2_gguf):
    ckpt = GGUFCheckpoint.open(smollm2_gguf)
    template = ChatTemplate(ckpt.chat_template, **ckpt.special_tokens())
    prompt = template.render(CONVERSATION, add_generation_prompt=True)
    expected = ref.apply_chat_template(CONVERSATION, tokenize=True, add_generation_prompt=True)
    expected = expected["input_ids"] if not isinstance(expected, list) else expected
    assert ours.encode(prompt) == list(expected)
    assert ours.encode(prompt).count(ours.token_to_id("<|im_start|>")) == 4


@pytest.mark.parametrize("pre", ["qwen2", "llama-bpe", "gpt2"])
def test_other_pre_tokenizers_equal_transformers(smollm2_gguf, pre):
    """SmolLM2's vocabulary under metadata that asks for another pre-tokenizer, against the
    conversion transformers' AutoTokenizer applies to GGUF files."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    metadata = dict(GGUFCheckpoint.open(smollm2_gguf).metadata)
    metadata["tokenizer.ggml.pre"] = pre
    ours = Tokenizer.from_gguf(metadata)
    ref, _ = convert_gguf_tokenizer("llama", {
        "tokenizer_type": "gpt2", "pre_tokenizer_type": pre, "tokens": metadata["tokenizer.ggml.tokens"],
        "merges": metadata["tokenizer.ggml.merges"], "token_type": metadata["tokenizer.ggml.token_type"]})
    for text in TEXTS:
        assert ours.encode(text) == ref.encode(text, add_special_tokens=False).ids, (pre, text)


def test_hf_dir_tokenizer_equals_transformers(ref, tmp_path):
    from transformers import AutoTokenizer

    ref.save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 2, "bos_token_id": 1}))
    ours = Tokenizer.from_hf_dir(str(tmp_path))
    again = AutoTokenizer.from_pretrained(str(tmp_path))
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == again.encode(text, add_special_tokens=False), text
        assert ours.decode(ids, skip_special_tokens=True) == again.decode(ids, skip_special_tokens=True)
    assert ours.eos_token_ids == {0, 2} and ours.eos_token == again.eos_token == "<|im_end|>"
    assert ours.bos_token_id == again.bos_token_id


def test_missing_or_unsupported_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(NinferError, match="no tokenizer.json"):
        Tokenizer.from_hf_dir(str(tmp_path))
    with pytest.raises(NinferError, match="byte-level BPE"):
        Tokenizer.from_gguf({"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]})


def _sentencepiece_metadata():
    """A small SentencePiece-style vocabulary as llama.cpp writes it: pieces with scores, byte tokens,
    control and user-defined tokens, and no merges (they are rebuilt from the scores)."""
    corpus = " ".join(TEXTS[:4] + ["the quick brown fox jumps over the lazy dog"]).split()
    pieces: dict[str, float] = {}
    for word in corpus:
        for w in (word, "\u2581" + word):
            for i in range(len(w)):
                for j in range(i + 1, min(len(w), i + 6) + 1):
                    pieces.setdefault(w[i:j], -float(len(pieces) % 97) - (j - i))
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["<think>"] + list(pieces)
    types = [2, 3, 3] + [6] * 256 + [4] + [1] * len(pieces)
    scores = [0.0] * 260 + list(pieces.values())
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}


def test_sentencepiece_gguf_tokenizer_equals_transformers():
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    md = _sentencepiece_metadata()
    ours = Tokenizer.from_gguf(md)
    ref, _ = convert_gguf_tokenizer("llama", {
        "tokenizer_type": "llama", "tokens": md["tokenizer.ggml.tokens"], "scores": md["tokenizer.ggml.scores"],
        "token_type": md["tokenizer.ggml.token_type"]})
    for text in TEXTS + ["<s>Hello<think>world</s> again", " the  quick\n fox"]:
        ids = ours.encode(text)
        assert ids == ref.encode(text, add_special_tokens=False).ids, text
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)
    # a character outside the vocabulary falls back to its UTF-8 bytes
    assert ours.encode("日") == [ours.token_to_id(t) for t in ("\u2581", "<0xE6>", "<0x97>", "<0xA5>")]
    assert ours.byte_fallback_ids == {ours.token_to_id(f"<0x{b:02X}>") for b in range(256)}
