"""The CLI: the answer on stdout, timings on stderr; every user error one line, non-zero, no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ninfer_testing import make_tiny_checkpoint


def ninfer(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "ninfer.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def assert_one_line_error(r, *words):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("Error")]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    make_tiny_checkpoint("llama", path)
    return path


def test_run_answers_on_stdout_with_timings_on_stderr():
    r = ninfer("run", "What is the capital of France?", "--max-tokens", "24")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "prefill" in r.stderr and "decode" in r.stderr and "tok/s" in r.stderr and "loaded" in r.stderr


def test_run_with_int8_kv_and_int8_lm_head_says_what_it_loaded():
    r = ninfer("run", "What is the capital of France?", "--max-tokens", "16", "--kv-cache", "int8", "--lm-head", "int8",
               "--max-context", "auto")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "int8 KV, lm_head int8" in r.stderr


def test_unknown_lm_head_format():
    assert_one_line_error(ninfer("run", "hi", "--lm-head", "int3"), "--lm-head", "int3")


def test_missing_model_path():
    assert_one_line_error(ninfer("run", "hi", "--model", "/no/such/model"), "does not exist")


def test_truncated_safetensors(tiny_dir, tmp_path):
    d = tmp_path / "trunc"
    shutil.copytree(tiny_dir, d)
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    assert_one_line_error(ninfer("run", "hi", "--model", str(d)), "truncated")


def test_truncated_gguf(smollm2_gguf, tmp_path):
    f = tmp_path / "cut.gguf"
    with open(smollm2_gguf, "rb") as src:
        f.write_bytes(src.read(5_000_000))
    assert_one_line_error(ninfer("run", "hi", "--model", str(f)), "truncated")


def test_unknown_architecture(tiny_dir, tmp_path):
    d = tmp_path / "unknown"
    shutil.copytree(tiny_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"], cfg["model_type"] = ["MambaForCausalLM"], "mamba"
    (d / "config.json").write_text(json.dumps(cfg))
    assert_one_line_error(ninfer("run", "hi", "--model", str(d)), "Unsupported architecture", "LlamaForCausalLM")


def test_prompt_longer_than_context(tiny_dir):
    assert_one_line_error(ninfer("run", "x" * 400, "--raw", "--model", tiny_dir, "--max-context", "64"),
                          "context holds 64")


def test_unknown_backend(tiny_dir):
    assert_one_line_error(ninfer("run", "hi", "--model", tiny_dir, "--backend", "nosuch"), "Unknown backend")


def test_backend_that_cannot_run_here(tiny_dir):
    if not any(b["name"] == "sm90" for b in json.loads(ninfer("backends", "--json").stdout)["backends"]):
        pytest.fail("ninfer-sm90 is not installed; the README's test setup installs every backend")
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        import torch

        assert not torch.cuda.is_available()
    assert_one_line_error(ninfer("run", "hi", "--model", tiny_dir, "--backend", "sm90"), "cannot run here")


def test_bench_json_reports_both_phases(tiny_dir):
    r = ninfer("bench", "--model", tiny_dir, "--prompt-tokens", "16", "--new-tokens", "8", "--json")
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)["runs"][0]
    assert run["prefill_tok_s"] > 0 and run["decode_tok_s"] > 0 and run["new_tokens"] == 8


def test_bench_times_the_formats_it_is_given(tiny_dir):
    r = ninfer("bench", "--model", tiny_dir, "--prompt-tokens", "16", "--new-tokens", "8", "--json",
               "--kv-cache", "int4", "--lm-head", "int8")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["formats"] == "int4 KV, lm_head int8"


def test_chat_keeps_history():
    r = subprocess.run([sys.executable, "-m", "ninfer.cli", "chat", "--max-tokens", "24"],
                       input="What is the capital of France?\nAnd what river flows through it?\n/exit\n",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    import re

    turns = [(int(a), int(b)) for a, b in re.findall(r"prompt (\d+) tok.*?generated (\d+) tok", r.stderr)]
    assert len(turns) == 2
    # the second prompt holds the first prompt, the first answer and the new question
    assert turns[1][0] > turns[0][0] + turns[0][1] + 5


def test_eval_ppl_reports_each_kv_format_and_the_lm_head(tmp_path):
    """`ninfer eval ppl`: one line per KV format from one load; --lm-head int8 changes the figure a little (the
    option took effect), and the dense figure is the Python API's."""
    import re

    from ninfer.llm import LLM

    src = os.path.join(os.path.dirname(__file__), "data", "declaration_of_independence.txt")
    with open(src, encoding="utf-8") as f:
        text = f.read()[:2500]
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")

    def ppl(*args):
        r = ninfer("eval", "ppl", str(path), *args)
        assert r.returncode == 0, r.stderr
        return {m[0] + m[1]: float(m[2]) for m in
                re.findall(r"kv=(\S+)\s+(lm_head=\S+)?\s*tokens=\d+\s+perplexity=([\d.]+)", r.stdout)}

    dense = ppl("--kv-cache", "bf16,int8")
    head = ppl("--lm-head", "int8")
    assert set(dense) == {"bf16", "int8"} and set(head) == {"bf16lm_head=int8"}
    assert dense["bf16"] == pytest.approx(LLM(progress=False).perplexity(text), abs=1e-4)
    assert dense["int8"] != dense["bf16"] and abs(dense["int8"] / dense["bf16"] - 1) < 0.01
    assert head["bf16lm_head=int8"] != dense["bf16"] and abs(head["bf16lm_head=int8"] / dense["bf16"] - 1) < 0.01
