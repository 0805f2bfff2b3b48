"""Tokenizers: a Hugging Face `tokenizer.json`, or one rebuilt from GGUF metadata, behind one class."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from .errors import NinferError

# llama.cpp token types (tokenizer.ggml.token_type)
CONTROL, USER_DEFINED = 3, 4

# Pre-tokenizer split regexes, as llama.cpp's llama-vocab.cpp and the models' tokenizer.json use them.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                 r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_SPLITS = {
    **dict.fromkeys(["llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "pixtral"], _LLAMA3_SPLIT),
    **dict.fromkeys(["qwen2", "qwen2.5", "qwen-2.5", "deepseek-r1-qwen", "megrez"], _QWEN2_SPLIT),
    "qwen35": _QWEN35_SPLIT,
}
# These split every digit off first, then apply GPT-2's regex (llama.cpp: "\p{N}" then the gpt2 pattern).
_DIGITS_THEN_GPT2 = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}
# llama.cpp ends generation on any of these control tokens, whatever tokenizer.ggml.eos_token_id says.
_END_OF_GENERATION_TEXTS = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                            "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<end_of_utterance>"}


def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character map that byte-level vocabularies are spelt in."""
    visible = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {b: chr(b) for b in visible}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


_BYTE_OF_CHAR = {c: b for b, c in _byte_level_alphabet().items()}


def _gguf_pre_tokenizer(pre: str | None):
    if pre in _SPLITS:
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(_SPLITS[pre]), behavior="isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre in _DIGITS_THEN_GPT2:
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  # "default", "gpt2" and the rest


class Tokenizer:
    """Text <-> token ids. `encode` parses special-token text and never adds BOS/EOS."""

    def __init__(self, hf: HFTokenizer, bos_token_id: int | None, eos_token_ids: Iterable[int],
                 eos_token_id: int | None = None, add_bos_token: bool = False):
        self._hf = hf
        self.bos_token_id = bos_token_id
        self.eos_token_ids: set[int] = {int(i) for i in eos_token_ids if i is not None}
        self.add_bos_token = add_bos_token  # whether the model expects BOS before a raw prompt
        self.vocab_size = hf.get_vocab_size(with_added_tokens=True)
        self.bos_token = self.id_to_token(bos_token_id) if bos_token_id is not None else None
        if eos_token_id is None and self.eos_token_ids:
            eos_token_id = min(self.eos_token_ids)
        self.eos_token_id = eos_token_id  # the one the chat template calls eos_token
        if eos_token_id is not None:
            self.eos_token_ids.add(int(eos_token_id))
        self.eos_token = self.id_to_token(self.eos_token_id) if self.eos_token_id is not None else None
        # SentencePiece-style <0xXX> tokens: the decoder validates a whole run of them at once, so the
        # detokenizer must not cut a run (an invalid run turns every byte in it into U+FFFD).
        self.byte_fallback_ids: frozenset[int] = frozenset()
        if getattr(hf.model, "byte_fallback", False):
            ids = (hf.token_to_id(f"<0x{b:02X}>") for b in range(256))
            self.byte_fallback_ids = frozenset(i for i in ids if i is not None)
        self.special_token_ids = frozenset(i for i, t in hf.get_added_tokens_decoder().items() if t.special)
        self._added_ids = frozenset(hf.get_added_tokens_decoder())
        self._byte_level = isinstance(hf.decoder, decoders.ByteLevel)

    # -- the contract -----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self._hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return self._hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def id_to_token(self, i: int) -> str | None:
        return self._hf.id_to_token(int(i))

    def token_to_id(self, s: str) -> int | None:
        return self._hf.token_to_id(s)

    def token_bytes(self, i: int) -> bytes:
        """The bytes one token stands for (a UTF-8 character may span several tokens, so decoding a token
        alone can give U+FFFD): what the OpenAI API's logprobs carry."""
        tok = self.id_to_token(i)
        if tok is None:
            return b""
        if int(i) in self._added_ids:
            return tok.encode()
        if self._byte_level and all(c in _BYTE_OF_CHAR for c in tok):
            return bytes(_BYTE_OF_CHAR[c] for c in tok)
        if len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):  # SentencePiece byte fallback
            try:
                return bytes([int(tok[3:5], 16)])
            except ValueError:
                pass
        return tok.replace("\u2581", " ").encode()

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_hf_dir(cls, path: str) -> "Tokenizer":
        file = os.path.join(path, "tokenizer.json")
        if not os.path.exists(file):
            raise NinferError(f"{path} has no tokenizer.json; copy it from the model's original repository.")
        try:
            hf = HFTokenizer.from_file(file)
        except Exception as e:
            raise NinferError(f"{file} cannot be read ({e}); copy it again from the model's repository.") from None
        tok_cfg, gen_cfg, cfg = (_read_json(os.path.join(path, n)) for n in
                                 ("tokenizer_config.json", "generation_config.json", "config.json"))
        eos_text = _token_text(tok_cfg.get("eos_token"))
        eos_id = hf.token_to_id(eos_text) if eos_text is not None else None
        eos_ids: list[int] = []
        for source in (gen_cfg, cfg):  # eos_token_id may be an int or a list of ints
            ids = source.get("eos_token_id")
            eos_ids += ids if isinstance(ids, list) else [ids] if isinstance(ids, int) else []
        if eos_id is None and eos_ids:
            eos_id = eos_ids[0]
        bos_text = _token_text(tok_cfg.get("bos_token"))
        bos_id = hf.token_to_id(bos_text) if bos_text is not None else None
        if bos_id is None:
            bos_id = cfg.get("bos_token_id") if isinstance(cfg.get("bos_token_id"), int) else None
        return cls(hf, bos_id, eos_ids, eos_id, add_bos_token=bool(tok_cfg.get("add_bos_token", False)))

    @classmethod
    def from_gguf(cls, metadata: dict[str, Any]) -> "Tokenizer":
        kind = metadata.get("tokenizer.ggml.model")
        tokens = metadata.get("tokenizer.ggml.tokens")
        builders = {"gpt2": _byte_level_bpe, "llama": _sentencepiece_bpe}
        if kind not in builders or not tokens:
            raise NinferError(f"This GGUF's tokenizer is {kind!r}; ninfer reads byte-level BPE ('gpt2') and "
                              "SentencePiece BPE ('llama') GGUF tokenizers, so use the model's Hugging Face "
                              "directory instead.")
        hf = builders[kind](metadata)
        bos, eos_id = metadata.get("tokenizer.ggml.bos_token_id"), metadata.get("tokenizer.ggml.eos_token_id")
        eos = {metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")} - {None}
        types = metadata.get("tokenizer.ggml.token_type") or []
        eos |= {i for i, t in enumerate(tokens) if t in _END_OF_GENERATION_TEXTS and i < len(types)
                and types[i] == CONTROL}
        # llama.cpp adds BOS to a SentencePiece vocabulary unless the file says otherwise
        add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", kind == "llama"))
        return cls(hf, bos, eos, eos_id, add_bos_token=add_bos)


def _byte_level_bpe(metadata: dict[str, Any]) -> HFTokenizer:
    """A byte-level BPE (GPT-2 family) tokenizer from llama.cpp's vocabulary metadata."""
    alphabet = _byte_level_alphabet()
    spelt = set(alphabet.values())
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    # A token outside the byte alphabet (written as plain text by some converters) is respelt in it.
    vocab = {(t if set(t) <= spelt else "".join(alphabet[b] for b in t.encode("utf-8"))): i
             for i, t in enumerate(tokens)}
    merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
    pre = metadata.get("tokenizer.ggml.pre")
    # Llama 3's tokenizer.json looks whole words up before merging (ignore_merges); llama.cpp does too.
    llama3 = pre in ("llama3", "llama-v3", "llama-bpe")
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False, ignore_merges=llama3)
    hf = HFTokenizer(bpe)
    hf.pre_tokenizer = _gguf_pre_tokenizer(pre)
    hf.decoder = decoders.ByteLevel()
    # Control tokens (<|im_start|>) are special; user-defined ones (<think>) are matched whole but kept
    # on decode. A control token not spelt in the byte alphabet is a converter mislabel: skip it.
    control = [AddedToken(t, special=True, normalized=False)
               for t, k in zip(tokens, types) if k == CONTROL and set(t) <= spelt]
    user = [AddedToken(t, special=False, normalized=False)
            for t, k in zip(tokens, types) if k == USER_DEFINED and t in vocab]
    hf.add_special_tokens(control)
    hf.add_tokens(user)
    return hf


def _sentencepiece_bpe(metadata: dict[str, Any]) -> HFTokenizer:
    """A SentencePiece BPE (Llama 2, Mistral) tokenizer, built as transformers' LlamaTokenizer builds it:
    Metaspace with a leading ▁ on the first piece, <0xXX> byte fallback, merges rebuilt from scores."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = metadata.get("tokenizer.ggml.merges")
    merges = ([tuple(m.split(" ", 1)) for m in merges] if merges
              else _merges_from_scores(tokens, metadata.get("tokenizer.ggml.scores") or [0.0] * len(tokens), vocab))
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True))
    space_prefix = bool(metadata.get("tokenizer.ggml.add_space_prefix", True))
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first" if space_prefix
                                                else "never", split=False)
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    hf.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if space_prefix else []))
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, k in zip(tokens, types) if k == CONTROL])
    hf.add_tokens([AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types) if k == USER_DEFINED])
    return hf


def _merges_from_scores(tokens: list[str], scores: list[float], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """SentencePiece files carry scores, not merges: every split of a token into two vocabulary pieces
    is a merge, ranked by the merged token's score (higher first), as transformers' generate_merges."""
    found = []
    for token, score in zip(tokens, scores):
        pairs = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
        pairs.sort(key=lambda p: (vocab[p[0]], vocab[p[1]]))
        found += [(left, right, score) for left, right in pairs]
    found.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in found]


def _token_text(v) -> str | None:
    return v.get("content") if isinstance(v, dict) else v if isinstance(v, str) else None


def _read_json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NinferError(f"{path} is not valid JSON ({e}); restore it from the model's original source.") from None
    return data if isinstance(data, dict) else {}
