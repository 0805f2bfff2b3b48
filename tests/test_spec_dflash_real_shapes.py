"""DFlash2 at the real shapes of a published z-lab draft checkpoint: its config.json as published (nested
``rope_parameters``, sliding-window layers, the selector and conv settings) and its tensor names and shapes
(hidden 6656, 32/8 heads of 128, MLP 19968, five target layers concatenated into fc: 33280 -> 6656), with
random weights. One draft layer instead of five keeps it within the CPU test budget; every tensor of that layer
has its published shape. The block pass must match the independent reference (transformers' Qwen3 modules and
PyTorch SDPA, ``test_spec_dflash_reference.reference_block``)."""

from __future__ import annotations

import torch
from test_spec_dflash_reference import reference_block

from ninfer.ops import DeviceSpec, resolve

# z-lab/dflash tests/fixtures/dflash2-config.json (the published layout), one layer kept
CONFIG = {
    "architectures": ["DFlash2DraftModel"], "attention_bias": False, "is_causal": False, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 6656, "intermediate_size": 19968, "layer_types": ["sliding_attention"],
    "max_position_embeddings": 131072, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 1,
    "num_key_value_heads": 8, "num_target_layers": 52, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}, "sliding_window": 2048,
    "tie_word_embeddings": False, "vocab_size": 202048,
    "dflash_config": {"block_size": 16, "conv_group_size": 16, "conv_kernel_size": 2,
                      "final_logit_softcapping": 20.0, "mask_token_id": 201818,
                      "output_multiplier": 0.19611613513818404, "selector_rank": 256, "selector_top_k": 16,
                      "target_layer_ids": [1, 13, 25, 37, 49]},
}
# the published safetensors header's shapes for layer 0 and the shared tensors (the selector is not used by the
# block pass and is left out: 2 x 202048 x 256)
SHAPES = {
    "fc.weight": (6656, 33280), "hidden_norm.weight": (6656,), "norm.weight": (6656,),
    "layers.0.attention_conv.base_kernel": (2, 2, 6656), "layers.0.attention_conv.kernel_projection.weight": (1664, 6656),
    "layers.0.input_layernorm.weight": (6656,), "layers.0.mlp.down_proj.weight": (6656, 19968),
    "layers.0.mlp.gate_proj.weight": (19968, 6656), "layers.0.mlp.up_proj.weight": (19968, 6656),
    "layers.0.mlp_conv.base_kernel": (2, 2, 6656), "layers.0.mlp_conv.kernel_projection.weight": (1664, 6656),
    "layers.0.post_attention_layernorm.weight": (6656,), "layers.0.self_attn.k_norm.weight": (128,),
    "layers.0.self_attn.k_proj.weight": (1024, 6656), "layers.0.self_attn.o_proj.weight": (6656, 4096),
    "layers.0.self_attn.q_norm.weight": (128,), "layers.0.self_attn.q_proj.weight": (4096, 6656),
    "layers.0.self_attn.v_proj.weight": (1024, 6656),
}


@torch.no_grad()
def test_dflash2_block_pass_at_published_shapes():
    from ninfer_drafters.dflash_model import DFlashModel

    gen = torch.Generator().manual_seed(7)
    w = {}
    for name, shape in SHAPES.items():
        if len(shape) == 1:  # norm weights around 1
            w[name] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        else:
            fan_in = shape[-1] if "base_kernel" not in name else 1
            w[name] = torch.randn(shape, generator=gen) * (0.5 if "base_kernel" in name else fan_in ** -0.5)
    ops = resolve("reference", DeviceSpec.of("cpu", torch.float32))
    model = DFlashModel(CONFIG, w, ops, 64, torch.device("cpu"), torch.float32)
    assert model.v2 and model.windows == [2048] and model.block_size == 16

    n, H = 6, CONFIG["hidden_size"]
    feats = torch.randn(n, 5 * H, generator=gen)  # five target layers' hidden states, concatenated
    noise = torch.randn(16, H, generator=gen)  # the embedded block [last, mask x 15]
    model.add_context(feats, 0)
    got = model.block_hidden(noise.clone())
    ref_cfg = dict(CONFIG, rope_theta=CONFIG["rope_parameters"]["rope_theta"])  # the reference reads it flat
    want = reference_block(ref_cfg, w, feats, noise)
    assert got.shape == (16, H)
    torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
