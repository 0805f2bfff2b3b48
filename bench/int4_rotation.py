"""int4 g128 weights after a rotation folded into the weights (QuaRot-style, nothing computed online), on the real
SmolLM2-135M: perplexity against the same quantisers without it.

    python bench/int4_rotation.py none|orth|blockhad [SEED]      (VO=0: no V/O rotation)

The RMSNorm weights go into the Linears that read their output (input_norm -> q|k|v, post_norm -> gate|up, the final
norm -> lm_head, untied from the embedding), then the residual stream is rotated by Q (576 x 576: a random orthogonal
matrix, ``orth``, or nine 64-point Hadamard blocks with random signs and a random permutation, ``blockhad``):
embedding E Q, readers W Q, writers (o, down) Q^T W; and each kv head's V by a random orthogonal R (v rows R^T W_v,
o columns W_o R). The float32 model is unchanged by it (its perplexity is printed); then RTN and ``clip`` (as
tests/test_quant_accuracy.py: calibrated on the first 2048 Alice tokens) quantise every decoder Linear int4 g128 (g64
where the input is 576). Measured on the Declaration's first 1024 tokens and on Alice tokens 4096-5120. CPU, float32,
reference backend, ~3 minutes a run on 2 cores.
"""

from __future__ import annotations

import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hadamard(n: int) -> torch.Tensor:
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def main(mode: str, seed: int) -> None:
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    from ninfer.llm import LLM
    from ninfer.quant.evaluate import clip_weights, rtn_weights
    from ninfer.quant.perplexity import negative_log_likelihoods

    llm = LLM(max_context=2048, progress=False)
    m, cfg = llm.model, llm.config
    with open(os.path.join(ROOT, "tests", "data", "declaration_of_independence.txt"), encoding="utf-8") as f:
        ids = llm.tokenizer.encode(f.read())[:1024]
    with open(os.path.join(ROOT, "tests", "data", "alice_in_wonderland_ch1-2.txt"), encoding="utf-8") as f:
        alice = llm.tokenizer.encode(f.read())
    calib, held = alice[:2048], alice[4096:5120]

    def ppl(tokens):
        return math.exp(float(negative_log_likelihoods(llm, tokens).mean()))

    base = ppl(ids), ppl(held)
    gen = torch.Generator().manual_seed(seed)

    def rand_orth(n):
        q, r = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
        return (q * torch.sign(torch.diagonal(r))).float()

    D, hq, hk, d = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    if mode != "none":
        if mode == "orth":
            Q = rand_orth(D)
        else:
            signs = (torch.randint(0, 2, (D,), generator=gen) * 2 - 1).float()
            Q = (torch.block_diag(*[hadamard(64)] * (D // 64)) * signs[:, None])[:, torch.randperm(D, generator=gen)]
        with torch.no_grad():
            E = m.embed_tokens.float()
            m.lm_head.weight = ((E * m.norm.weight.float()) @ Q).to(E.dtype)
            m.embed_tokens = (E @ Q).to(E.dtype)
            m.norm.weight = torch.ones_like(m.norm.weight)
            for layer in m.layers:
                a, mlp = layer.mixer, layer.mlp
                w = a.qkv.weight.float() * layer.input_norm.weight.float() @ Q
                wo = a.o.weight.float()
                if os.environ.get("VO", "1") == "1":
                    for h in range(hk):
                        R, r0 = rand_orth(d), (hq + hk + h) * d
                        w[r0:r0 + d] = R.t() @ w[r0:r0 + d]
                        for qh in range(h * (hq // hk), (h + 1) * (hq // hk)):
                            wo[:, qh * d:(qh + 1) * d] = wo[:, qh * d:(qh + 1) * d] @ R
                a.qkv.weight, a.o.weight = w.to(a.qkv.weight.dtype), (Q.t() @ wo).to(wo.dtype)
                mlp.gate_up.weight = ((mlp.gate_up.weight.float() * layer.post_norm.weight.float()) @ Q).to(
                    mlp.gate_up.weight.dtype)
                mlp.down.weight = (Q.t() @ mlp.down.weight.float()).to(mlp.down.weight.dtype)
                layer.input_norm.weight = torch.ones_like(layer.input_norm.weight)
                layer.post_norm.weight = torch.ones_like(layer.post_norm.weight)
        llm.runner.reset()
    print(f"{mode} (seed {seed}, V/O {os.environ.get('VO', '1')}): float32 {ppl(ids):.4f} (unrotated {base[0]:.4f})")
    with rtn_weights(llm, 4, 128):
        r = ppl(ids), ppl(held)
    with clip_weights(llm, calib, 4, 128):
        c = ppl(ids), ppl(held)
    print(f"RTN  {100 * (r[0] / base[0] - 1):+.2f}% (held-out {100 * (r[1] / base[1] - 1):+.2f}%)   "
          f"clip {100 * (c[0] / base[0] - 1):+.2f}% (held-out {100 * (c[1] / base[1] - 1):+.2f}%)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "orth", int(sys.argv[2]) if len(sys.argv) > 2 else 0)
