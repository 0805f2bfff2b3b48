"""The incremental detokenizer: its pieces always concatenate to tokenizer.decode(all ids), it never
yields a broken character when the whole text has none, and its cost per token stays bounded.
Checked on SmolLM2's byte-level BPE and on a SentencePiece-style byte-fallback tokenizer."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers

from ninfer.engine.detokenizer import IncrementalDetokenizer
from ninfer.tokenizer import Tokenizer
from ninfer.weights.gguf import GGUFCheckpoint

POOL = list("abc XYZ 0123\n\t") + ["é", "ß", "Ω", "ж", "日", "本", "語", "한", "😀", "🎉", "👩‍💻", "🇫🇷", "𝔘", "–", "“", "”"]


def _sentencepiece_like() -> Tokenizer:
    """Llama-2 style: ▁ for spaces, <0xXX> byte tokens for characters outside the vocabulary, and a
    decoder that drops the first leading space (the case that makes window decoding subtle)."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for piece in ["▁", "▁▁", "a", "b", "c", "X", "Y", "Z", "0", "1", "2", "3", "é", "▁a", "▁b", "\n", "\t"]:
        vocab.setdefault(piece, len(vocab))
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=[("▁", "a"), ("▁", "b"), ("▁", "▁")], byte_fallback=True,
                                unk_token="<unk>"))
    hf.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.add_special_tokens(["<s>", "</s>"])
    return Tokenizer(hf, bos_token_id=1, eos_token_ids=[2])


@pytest.fixture(scope="module", params=["smollm2", "sentencepiece"])
def tokenizer(request, smollm2_gguf):
    if request.param == "smollm2":
        return GGUFCheckpoint.open(smollm2_gguf).tokenizer()
    return _sentencepiece_like()


def _stream(tokenizer, ids, skip=False):
    detok = IncrementalDetokenizer(tokenizer, skip_special_tokens=skip)
    return [detok.add(i) for i in ids] + [detok.flush()]


def test_random_token_sequences_concatenate_to_decode(tokenizer):
    rng = random.Random(0)
    specials = sorted(tokenizer.eos_token_ids | {tokenizer.bos_token_id})
    for _ in range(150):
        ids = [rng.choice(specials) if rng.random() < 0.1 else rng.randrange(tokenizer.vocab_size)
               for _ in range(rng.randrange(1, 30))]
        for skip in (False, True):
            pieces = _stream(tokenizer, ids, skip)
            full = tokenizer.decode(ids, skip_special_tokens=skip)
            assert "".join(pieces) == full, ids
            if "\ufffd" not in full:
                assert not any("\ufffd" in p for p in pieces), ids


def test_multibyte_text_streams_whole_characters(tokenizer):
    rng = random.Random(1)
    texts = ["héllo 世界 😀🎉 naïve Ωμέγα ✓ 🇫🇷 𝔘𝔫𝔦 👩‍💻"]
    texts += ["".join(rng.choice(POOL) for _ in range(rng.randrange(1, 60))) for _ in range(60)]
    for text in texts:
        ids = tokenizer.encode(text)
        pieces = _stream(tokenizer, ids)
        assert "".join(pieces) == tokenizer.decode(ids)
        assert not any("\ufffd" in p for p in pieces), text
    assert any(p == "" for p in _stream(tokenizer, tokenizer.encode("日本語😀")))  # partial bytes were held back


def test_cost_per_token_is_bounded(tokenizer):
    decoded = []

    class Counting:
        def decode(self, ids, skip_special_tokens=False):
            decoded.append(len(ids))
            return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    text = "".join(random.Random(2).choice(POOL) for _ in range(3000))
    ids = tokenizer.encode(text)
    pieces = _stream(Counting(), ids)
    assert "".join(pieces) == tokenizer.decode(ids)
    assert max(decoded) <= 16  # the window never grows with the text
