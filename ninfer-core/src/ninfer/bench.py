"""`ninfer bench`: prefill and decode tok/s on fixed lengths, beside a peer in the same process."""

from __future__ import annotations

import time

import torch


def _timed_ninfer(llm, prompt: list[int], new: int) -> dict:
    from .config.sampling import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=new, ignore_eos=True)
    llm.generate(prompt[:8], SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True))  # warm-up
    llm.runner.reset()
    out = llm.generate(prompt, params)
    s = out.stats
    return {"engine": f"ninfer:{llm.backend}", "prompt_tokens": len(prompt), "new_tokens": s["generated_tokens"],
            "prefill_tok_s": s["prefill_tok_s"], "decode_tok_s": s["decode_tok_s"]}


def _timed_transformers(path: str, prompt: list[int], new: int, device: torch.device, dtype) -> dict:
    import os

    from transformers import AutoModelForCausalLM

    if path.endswith(".gguf"):
        m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=dtype)
    else:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    m = m.to(device).eval()
    ids = torch.tensor([prompt], device=device)
    kw = dict(do_sample=False, pad_token_id=0)

    class Clock:  # generate's streamer hook: put() gets the prompt, then each new token as it is made
        def __init__(self):
            self.times = []

        def put(self, _):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            self.times.append(time.perf_counter())

        def end(self):
            pass

    with torch.no_grad():
        m.generate(ids[:, :8], max_new_tokens=4, min_new_tokens=4, **kw)
        clock = Clock()
        t = time.perf_counter()
        m.generate(ids, max_new_tokens=new, min_new_tokens=new, streamer=clock, **kw)
    first, last = clock.times[1], clock.times[-1]  # the first new token, the last: one run times both phases
    return {"engine": "transformers", "prompt_tokens": len(prompt), "new_tokens": new,
            "prefill_tok_s": len(prompt) / (first - t), "decode_tok_s": (new - 1) / (last - first)}


def run_bench(model, backend, max_context, prompt_tokens: int, new_tokens: int, peer: str, llm=None) -> dict:
    """``llm``: the loaded model to time (``ninfer bench`` passes one built with its KV and lm_head formats)."""
    from .llm import LLM

    llm = llm or LLM(model=model, backend=backend, max_context=max_context, progress=False)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, llm.config.vocab_size, (prompt_tokens,), generator=g).tolist()
    runs = [_timed_ninfer(llm, prompt, new_tokens)]
    if peer == "transformers":
        runs.append(_timed_transformers(llm.model_path, prompt, new_tokens, llm.device, llm.dtype))
    return {"model": llm.model_path, "device": str(llm.device), "dtype": str(llm.dtype).replace("torch.", ""),
            "threads": torch.get_num_threads(), "runs": runs}
