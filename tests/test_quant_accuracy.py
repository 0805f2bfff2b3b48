"""Accuracy of quantised KV caches and weights on the real SmolLM2 model.

Baseline: the GGUF dequantised to float32, float32 KV cache. Measured: perplexity over the first
1024 tokens of the fixed public-domain text (tests/data/declaration_of_independence.txt), every
variant on the same loaded model: ``ninfer.quant.evaluate`` swaps the KV format, or RTN-quantises
every Linear but lm_head to exactly the codes ``ninfer quantize`` writes (bf16 scales; RTN, and
``--method clip`` calibrated on Alice in Wonderland, never the evaluated text; ``clip + tune``: clip, then its
group scales and norm weights tuned end to end on KL to the fp32 model over Alice windows, ``--tune-steps``,
with the KL printed beside). The table prints with
``pytest -s`` and is recorded in bench/RESULTS.md (bench/int4_accuracy.py compares more int4 methods).
"""

import math
import os

import pytest
import torch

from ninfer.quant.evaluate import (
    clip_tuned_weights,
    clip_weights,
    kv_format,
    lm_head_quantized,
    round_weights,
    rtn_weights,
)
from ninfer.quant.perplexity import log_probabilities, negative_log_likelihoods

TEXT = os.path.join(os.path.dirname(__file__), "data", "declaration_of_independence.txt")
CALIBRATION = os.path.join(os.path.dirname(__file__), "data", "alice_in_wonderland_ch1-2.txt")  # never the TEXT
TOKENS = 1024
CALIBRATION_TOKENS = 2048
HELD_OUT = slice(4096, 4096 + TOKENS)  # Alice tokens no calibration here sees: held-out prose of the calibration's kind
ROUND = {"iters": 10, "windows": 8, "window": 256, "batch": 2, "lr": 0.02}  # lean --method round (CLI: 50 steps,
# 16 windows of 256 tokens, 4 per step): ~90 s here against ~10 min, nearly the same KL (bench/RESULTS.md)
TUNE = {"steps": 15, "windows": 16, "holdout": 3}  # --tune-steps 15: Alice tokens 0-4096 train, 5120-5888 judge
BASE = "baseline (fp32 weights, fp32 KV)"
TUNED = "weights int4 g128 clip + tune"


@pytest.fixture(scope="module")
def llm():
    from ninfer.llm import LLM

    return LLM(max_context=2048, progress=False)


@pytest.fixture(scope="module")
def ids(llm):
    with open(TEXT, encoding="utf-8") as f:
        return llm.tokenizer.encode(f.read())[:TOKENS]


@pytest.fixture(scope="module")
def table(llm, ids):
    def ppl(tokens=ids):
        return math.exp(float(negative_log_likelihoods(llm, tokens).mean()))

    @torch.inference_mode()
    def kl(base_lp, tokens):  # mean per-token KL(fp32 model || this model) of the next-token distributions
        lp = log_probabilities(llm, tokens)
        return float((base_lp.exp() * (base_lp - lp)).sum(-1).mean())

    rows = {BASE: ppl()}
    for fmt, label in (("int8", "KV int8 (group 64)"), ("int4", "KV int4, Hadamard-rotated"),
                       ("int4_norot", "KV int4, no rotation")):
        with kv_format(llm, fmt):
            rows[label] = ppl()
    for bits in (8, 4):
        with rtn_weights(llm, bits, 128):
            rows[f"weights int{bits} g128 RTN"] = ppl()
    with rtn_weights(llm, 4, 128, symmetric=False):
        rows["weights int4 g128 RTN asymmetric"] = ppl()
    for fmt in ("int8", "int4"):  # LLM(quantize_lm_head=...): only lm_head, the layers dense
        with lm_head_quantized(llm, fmt):
            rows[f"lm_head {fmt} (g64) RTN"] = ppl()
    with open(CALIBRATION, encoding="utf-8") as f:
        alice = llm.tokenizer.encode(f.read())
    calibration, held_out = alice[:CALIBRATION_TOKENS], alice[HELD_OUT]
    held = {BASE: ppl(held_out)}
    base_lp, base_lp_h = log_probabilities(llm, ids), log_probabilities(llm, held_out)
    kls = {}
    with clip_weights(llm, calibration, 4, 128):  # asymmetric clip: +23.9%, no gain here (bench/RESULTS.md)
        rows["weights int4 g128 clip"], held["weights int4 g128 clip"] = ppl(), ppl(held_out)
        kls["weights int4 g128 clip"] = (kl(base_lp, ids), kl(base_lp_h, held_out))
    with clip_tuned_weights(llm, alice[:4096], 4, 128, holdout_ids=alice[5120:], progress=False, **TUNE):
        rows[TUNED], held[TUNED] = ppl(), ppl(held_out)
        kls[TUNED] = (kl(base_lp, ids), kl(base_lp_h, held_out))
    with round_weights(llm, calibration, 4, 128, progress=False, **ROUND):
        rows["weights int4 g128 round"], held["weights int4 g128 round"] = ppl(), ppl(held_out)
    print(f"\nSmolLM2-135M-Instruct (Q4_1 GGUF -> fp32), {len(ids)} tokens of the Declaration of Independence "
          f"(clip, round: calibrated on {len(calibration)} tokens of Alice in Wonderland; round: {ROUND}; "
          f"tune: {TUNE})")
    print(f"{'variant':34s} {'perplexity':>10s} {'vs baseline':>12s}")
    for name, value in rows.items():
        print(f"{name:34s} {value:10.4f} {100 * (value / rows[BASE] - 1):+11.2f}%")
    print(f"held-out Alice in Wonderland, tokens {HELD_OUT.start}-{HELD_OUT.stop}:")
    for name, value in held.items():
        print(f"{name:34s} {value:10.4f} {100 * (value / held[BASE] - 1):+11.2f}%")
    print("KL(fp32 || quantised), nats/token, Declaration / held-out Alice:")
    for name, (k, kh) in kls.items():
        print(f"{name:34s} {k:10.4f} {kh:10.4f}")
    out = {k: v / rows[BASE] - 1 for k, v in rows.items()}
    out.update({f"held-out {k}": v / held[BASE] - 1 for k, v in held.items()})
    out.update({f"KL {k}": v for k, v in kls.items()})
    return out


def test_perplexity_matches_transformers(llm):
    """llm.perplexity against transformers' own forward of the same GGUF (dequantised by `gguf`)."""
    from transformers import AutoModelForCausalLM

    path = llm.model_path
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                              dtype=torch.float32)
    text = "We hold these truths to be self-evident, that all men are created equal, that they are endowed " \
           "by their Creator with certain unalienable Rights, that among these are Life, Liberty and the " \
           "pursuit of Happiness."
    ids = llm.tokenizer.encode(text)
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]))
    assert llm.perplexity(text) == pytest.approx(math.exp(float(nll)), rel=1e-4)


# "within x%" is read as "costs at most x%": a variant that scores lower passes. Scoring lower is real
# here, not a path difference (the baseline matches transformers to 1e-4 over these 1024 tokens): the
# model is over-confident on this text (logits / 1.05 lower its perplexity by 3.7%, / 0.95 raise it 5.5%),
# so perturbations that blur its predictions lower it. Int8 weights: -1.1% with bf16 scales, -0.45% with
# float32 scales (the bf16 rounding of the scales is most of it); int4 RTN of only the q|k|v projections
# gives -14%. Two-sided bounds would test this text's luck, not the quantiser.
def test_int8_kv_within_half_percent(table):
    assert table["KV int8 (group 64)"] < 0.005


def test_int4_kv_with_rotation_within_3_percent_and_better_than_without(table):
    rot, plain = table["KV int4, Hadamard-rotated"], table["KV int4, no rotation"]
    assert rot < 0.03
    assert rot < 0.5 * plain, (rot, plain)  # the rotation removes most of the loss


def test_int8_weights_within_1_percent(table):
    assert table["weights int8 g128 RTN"] < 0.01
    assert abs(table["weights int8 g128 RTN"]) < 0.03  # and not far off the other way either


def test_int4_g128_weights_within_5_percent(table):
    # clip, then its group scales and norm weights tuned end to end on KL to the fp32 model (--tune-steps 15,
    # calibrated on Alice only): measured -4.6% (clip alone +18.4%, RTN +28.7%); the "costs at most" reading above.
    # That it is closeness, not the text's over-confidence: the KL falls too (next test).
    assert table[TUNED] < 0.05


def test_int4_g128_tuning_beats_clip_in_kl_and_on_held_out_prose(table):
    # measured KL 0.861 -> 0.753 (Declaration), 0.224 -> 0.132 (held-out Alice 4096-5120, outside the tuning's
    # windows and its held-out ones); held-out perplexity +15.3% -> +6.0%
    kl_clip, kl_tuned = table["KL weights int4 g128 clip"], table[f"KL {TUNED}"]
    assert kl_tuned[0] < 0.95 * kl_clip[0], (kl_tuned, kl_clip)
    assert kl_tuned[1] < 0.8 * kl_clip[1], (kl_tuned, kl_clip)
    assert table[f"held-out {TUNED}"] < table["held-out weights int4 g128 clip"] - 0.05


def test_int4_g128_round_beats_clip_on_held_out_prose(table):
    # Alice tokens 4096-5120 (calibration: tokens 0-2048): measured round +6.9%, clip +15.3%, RTN-sym ~+25.6%;
    # the CLI's longer run (50 steps, 16 windows) +2.5..3.4%. On the Declaration this lean setting is worse than
    # clip (+38% vs +18.5%: the loss sits on the preamble, tokens 64-256) though closer in KL (0.76 vs 0.86 nats);
    # the CLI's setting gave +12.8% in one run, +46% in another: that text's perplexity is a noisy judge.
    held_round, held_clip = table["held-out weights int4 g128 round"], table["held-out weights int4 g128 clip"]
    assert held_round < held_clip - 0.05, (held_round, held_clip)
    assert held_round < 0.10, held_round


def test_int4_g128_clip_search_beats_rtn(table):
    # measured +18.5% vs +28.7% (KL to the fp32 model 0.86 vs 1.25 nats/token in bench/int4_accuracy.py)
    assert table["weights int4 g128 clip"] < table["weights int4 g128 RTN"] - 0.05


def test_int4_g128_weights_no_clipping_loss(table):
    # the min-max observer's absmax/7.5 scale (clips every group's largest positive weight) cost +69.6%;
    # with the largest-magnitude weight exactly on a code it is ~+26% (asymmetric ~+24%)
    assert table["weights int4 g128 RTN"] < 0.35
    assert table["weights int4 g128 RTN asymmetric"] < 0.35


def test_int4_g128_weights_cost_more_than_int8(table):
    assert table["weights int4 g128 RTN"] > 0.05 + table["weights int8 g128 RTN"]


def test_int8_lm_head_within_half_percent(table):
    # measured -0.09% (int4: +13.3%, recorded, not an option to recommend); the embedding stays dense
    assert table["lm_head int8 (g64) RTN"] < 0.005
    assert abs(table["lm_head int8 (g64) RTN"]) < 0.03
    assert table["lm_head int4 (g64) RTN"] > table["lm_head int8 (g64) RTN"]


def test_llm_quantize_lm_head_option(llm):
    """LLM(quantize_lm_head="int8"): lm_head becomes the grouped-int weight ninfer quantize would write (the tied
    embedding stays dense), the logits stay within 1e-2 of the dense model's; an unknown format is refused."""
    from ninfer.errors import NinferError
    from ninfer.llm import LLM
    from ninfer.quant.layout import QuantWeight

    q = LLM(max_context=256, progress=False, quantize_lm_head="int8")
    w = q.model.lm_head.weight
    assert isinstance(w, QuantWeight) and (w.bits, w.group_size, w.zeros) == (8, 64, None)
    assert isinstance(q.model.embed_tokens, torch.Tensor)
    ids = llm.tokenizer.encode("We hold these truths to be self-evident, that all men are created equal")
    llm.runner.reset()
    ld, lq = llm.runner.prefill(ids), q.runner.prefill(ids)
    assert ((lq - ld).norm() / ld.norm()) < 1e-2
    with pytest.raises(NinferError):
        LLM(max_context=256, progress=False, quantize_lm_head="int3")
