# ruff: noqa  (a verbatim copy of /work/shared/peers/transformers_decode.py, carried to the GPU machine)
"""Peer baseline on a GPU machine: transformers batch-1 prefill and decode on random weights of real shapes
(Qwen3-8B and Qwen3.5-27B). Run it in the same run as ninfer's own benchmark and print both."""
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM

torch.manual_seed(0)
dev = "cuda"

def copy_bw():
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device=dev); y = torch.empty_like(x)
    for _ in range(3): y.copy_(x)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10): y.copy_(x)
    torch.cuda.synchronize(); return 2 * x.numel() * 10 / (time.perf_counter() - t)

def qwen3_8b():
    from transformers import Qwen3Config
    return Qwen3Config(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                       head_dim=128, intermediate_size=12288, vocab_size=151936, tie_word_embeddings=False,
                       max_position_embeddings=40960, rope_theta=1e6)

def qwen35_27b():
    from transformers import Qwen3_5TextConfig
    return Qwen3_5TextConfig(hidden_size=5120, num_hidden_layers=64, intermediate_size=17408,
        num_attention_heads=24, num_key_value_heads=4, head_dim=256, vocab_size=248320,
        linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel_dim=4, tie_word_embeddings=False, max_position_embeddings=262144)

def run(name, cfg, prompt=512, new=128, compile_=False):
    cfg.torch_dtype = torch.bfloat16
    with torch.device(dev):
        m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    nbytes = sum(p.numel() * p.element_size() for n, p in m.named_parameters() if "embed_tokens" not in n)
    ids = torch.randint(0, cfg.vocab_size, (1, prompt), device=dev)
    kw = dict(do_sample=False, pad_token_id=0)
    if compile_:
        kw["cache_implementation"] = "static"; m.forward = torch.compile(m.forward, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(2): m.generate(ids, max_new_tokens=8, min_new_tokens=8, **kw)
        torch.cuda.synchronize(); t = time.perf_counter()
        m.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw); torch.cuda.synchronize(); tp = time.perf_counter() - t
        t = time.perf_counter()
        m.generate(ids, max_new_tokens=new + 1, min_new_tokens=new + 1, **kw); torch.cuda.synchronize(); tt = time.perf_counter() - t
    dec = new / (tt - tp)
    print(f"RESULT {name} compile={compile_} prefill_tok_s={prompt/tp:.0f} decode_tok_s={dec:.1f} weights_GB={nbytes/1e9:.1f} "
          f"bw_used_TBs={dec*nbytes/1e12:.2f}", flush=True)
    del m; torch.cuda.empty_cache()

print("transformers", transformers.__version__, "torch", torch.__version__, torch.cuda.get_device_name())
bw = copy_bw(); print(f"copy bandwidth {bw/1e12:.2f} TB/s")
which = sys.argv[1:] or ["8b", "27b"]
for w in which:
    try:
        if w == "8b": run("qwen3-8b-shape", qwen3_8b())
        elif w == "27b": run("qwen3.5-27b-shape", qwen35_27b())
        elif w == "8b-compile": run("qwen3-8b-shape", qwen3_8b(), compile_=True)
    except Exception as e:
        print("FAILED", w, type(e).__name__, str(e)[:300], flush=True)
