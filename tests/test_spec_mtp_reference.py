"""The MTP drafter on a tiny Qwen3.5 hybrid against an independent reference built from transformers:
the target's hidden states from transformers' own model, the head from transformers' Qwen3.5 modules
(zero-centred RMSNorm, the gated full-attention decoder layer, its rotary embedding) loaded with the
checkpoint's ``mtp.*`` tensors, recomputed causally over the whole sequence at every chained step."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from test_qwen3_5 import TEXT, make_checkpoint
from test_spec_support import add_mtp, hidden_probe
from transformers import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import (
    Qwen3_5DecoderLayer,
    Qwen3_5RMSNorm,
    Qwen3_5TextRotaryEmbedding,
)

from ninfer import LLM
from ninfer.drafting import DraftContext, build_drafter
from ninfer.engine.speculative import _TargetHidden

SEQ = [5, 17, 42, 99, 123, 7, 5, 17, 42, 61, 250, 88, 5]


class ReferenceMTP:
    def __init__(self, path: str):
        w = {k[len("mtp."):]: v for k, v in load_file(f"{path}/mtp.safetensors").items()}
        cfg = Qwen3_5TextConfig(**{**TEXT, "layer_types": ["full_attention"] * TEXT["num_hidden_layers"]})
        cfg._attn_implementation = "sdpa"  # causal when no mask is given
        H, eps = TEXT["hidden_size"], TEXT["rms_norm_eps"]
        self.norms = {}
        for name in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            n = Qwen3_5RMSNorm(H, eps=eps)
            n.weight.data.copy_(w[f"{name}.weight"])
            self.norms[name] = n
        self.fc = w["fc.weight"]
        self.layer = Qwen3_5DecoderLayer(cfg, layer_idx=0)
        missing = self.layer.load_state_dict({k[len("layers.0."):]: v for k, v in w.items()
                                              if k.startswith("layers.0.")}, strict=True)
        assert not missing.missing_keys
        self.rope = Qwen3_5TextRotaryEmbedding(cfg)

    def __call__(self, h: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """h, embeds: [T, H] for positions 0..T-1 -> the head's output after its norm [T, H]."""
        x = torch.cat([self.norms["pre_fc_norm_embedding"](embeds), self.norms["pre_fc_norm_hidden"](h)], -1)
        x = (x @ self.fc.T)[None]
        pos = torch.arange(x.shape[1])[None]
        out = self.layer(x, position_embeddings=self.rope(x, pos), position_ids=pos)
        out = out[0] if isinstance(out, tuple) else out
        return self.norms["norm"](out[0])


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("qwen3_5") / "model")
    hf = make_checkpoint(path, multimodal=False, seed=31)
    add_mtp(path, seed=32)
    return path, hf


@torch.no_grad()
def test_mtp_chain_matches_the_reference(hybrid):
    path, hf = hybrid
    llm = LLM(path, progress=False, max_context=128)
    drafter = build_drafter("mtp:3", llm)
    target = _TargetHidden(llm.runner, hidden_probe(drafter))  # every state, none observed
    target.prefill(SEQ[:-1])
    ref_h = hf.model(torch.tensor([SEQ[:-1]])).last_hidden_state[0]  # after the final norm
    torch.testing.assert_close(target.post, ref_h, rtol=1e-4, atol=1e-4)

    ref = ReferenceMTP(path)
    embed = hf.model.embed_tokens.weight
    h, e = ref_h, embed[torch.tensor(SEQ[1:])]
    expected = []
    for _ in range(3):  # chain: the head's own (normed) output stands in for the next hidden state
        out = ref(h, e)
        t = int(hf.lm_head(out[-1]).argmax())
        expected.append(t)
        h = torch.cat([h, out[-1:]])
        e = torch.cat([e, embed[t][None]])
    got = drafter.propose(DraftContext(SEQ, len(SEQ), 3, 0, target.post, target.pre, {}))
    assert got.tokens == expected
    # the head's hidden states themselves, not only their argmax
    first = drafter.head.norm(drafter._step(target.post, SEQ[1:], 0))
    torch.testing.assert_close(first, ref(ref_h, embed[torch.tensor(SEQ[1:])]), rtol=1e-4, atol=1e-4)
