"""Random-weight draft checkpoints in the published formats, shared by the speculative-decoding tests:
``mtp.*`` tensors as Qwen3.5 checkpoints carry them, and z-lab DFlash / DFlash2 draft directories
(config.json + model.safetensors with z-lab's tensor names and config fields)."""

from __future__ import annotations

import json
import os

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def _rand(shape, gen, std=0.1):
    return torch.randn(shape, generator=gen) * std


def _norm(n, gen):
    return 1.0 + torch.randn(n, generator=gen) * 0.2


def _layer(prefix, H, hq, hk, d, inter, gen, gated=False):
    return {
        f"{prefix}.input_layernorm.weight": _norm(H, gen),
        f"{prefix}.post_attention_layernorm.weight": _norm(H, gen),
        f"{prefix}.self_attn.q_proj.weight": _rand((hq * d * (2 if gated else 1), H), gen),
        f"{prefix}.self_attn.k_proj.weight": _rand((hk * d, H), gen),
        f"{prefix}.self_attn.v_proj.weight": _rand((hk * d, H), gen),
        f"{prefix}.self_attn.o_proj.weight": _rand((H, hq * d), gen),
        f"{prefix}.self_attn.q_norm.weight": _norm(d, gen),
        f"{prefix}.self_attn.k_norm.weight": _norm(d, gen),
        f"{prefix}.mlp.gate_proj.weight": _rand((inter, H), gen),
        f"{prefix}.mlp.up_proj.weight": _rand((inter, H), gen),
        f"{prefix}.mlp.down_proj.weight": _rand((H, inter), gen),
    }


def model_shape(path: str) -> dict:
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    c = c.get("text_config", c)
    hq = c["num_attention_heads"]
    return dict(H=c["hidden_size"], hq=hq, hk=c.get("num_key_value_heads") or hq,
                d=c.get("head_dim") or c["hidden_size"] // hq, inter=c["intermediate_size"],
                vocab=c["vocab_size"], layers=c["num_hidden_layers"],
                gated=c.get("model_type", "").startswith("qwen3_5"))


def add_mtp(path: str, seed: int = 0) -> None:
    """Write a complete random MTP head (``mtp.*``) into the model directory, in its own file."""
    s = model_shape(path)
    gen = torch.Generator().manual_seed(seed)
    H = s["H"]
    t = {"mtp.fc.weight": _rand((H, 2 * H), gen), "mtp.norm.weight": _norm(H, gen),
         "mtp.pre_fc_norm_embedding.weight": _norm(H, gen), "mtp.pre_fc_norm_hidden.weight": _norm(H, gen)}
    if s["gated"]:  # Qwen3.5 norms are zero-centred (1 + w): keep w near 0
        t = {k: (v - 1.0 if "norm" in k else v) for k, v in t.items()}
    layer = _layer("mtp.layers.0", H, s["hq"], s["hk"], s["d"], s["inter"], gen, s["gated"])
    if s["gated"]:
        layer = {k: (v - 1.0 if "norm" in k else v) for k, v in layer.items()}
    t.update(layer)
    # the hybrid's own file may carry a partial head; ours replaces those names (later file wins)
    main = os.path.join(path, "model.safetensors")
    with safe_open(main, "pt") as f:
        rest = {n: f.get_tensor(n) for n in f.keys() if not n.startswith("mtp.")}
    save_file(rest, main, metadata={"format": "pt"})
    save_file(t, os.path.join(path, "mtp.safetensors"), metadata={"format": "pt"})


def write_dflash(path: str, target: str, layer_ids: list[int], v2: bool = False, num_layers: int = 2,
                 block_size: int = 8, mask_token_id: int = 300, seed: int = 0) -> str:
    """A random z-lab DFlash (or DFlash2) draft model for the target at ``target``; returns its path."""
    s = model_shape(target)
    H, d, hq, hk = s["H"], s["d"], s["hq"], s["hk"]
    gen = torch.Generator().manual_seed(seed)
    t = {"fc.weight": _rand((H, len(layer_ids) * H), gen), "hidden_norm.weight": _norm(H, gen),
         "norm.weight": _norm(H, gen)}
    group, kernel, rank, top_k = 16, 2, 8, 4
    for i in range(num_layers):
        t.update(_layer(f"layers.{i}", H, hq, hk, d, 2 * H, gen))
        if v2:
            for conv in ("attention_conv", "mlp_conv"):
                t[f"layers.{i}.{conv}.base_kernel"] = _rand((2, kernel, H), gen, 0.5)
                t[f"layers.{i}.{conv}.kernel_projection.weight"] = _rand((2 * kernel * (H // group), H), gen)
    if v2:
        t["candidate_selector.hidden_projection.weight"] = _rand((rank, H), gen)
        t["candidate_selector.predecessor_codebook"] = _rand((s["vocab"], rank), gen, 1.0)
        t["candidate_selector.successor_codebook"] = _rand((s["vocab"], rank), gen, 1.0)
    dcfg = {"block_size": block_size, "mask_token_id": mask_token_id, "target_layer_ids": layer_ids}
    if v2:
        dcfg.update(conv_group_size=group, conv_kernel_size=kernel, final_logit_softcapping=20.0,
                    output_multiplier=0.5, selector_rank=rank, selector_top_k=top_k)
    cfg = {"architectures": ["DFlash2DraftModel" if v2 else "DFlashDraftModel"], "model_type": "qwen3",
           "attention_bias": False, "hidden_size": H, "intermediate_size": 2 * H, "head_dim": d,
           "num_attention_heads": hq, "num_key_value_heads": hk, "num_hidden_layers": num_layers,
           "num_target_layers": s["layers"], "rms_norm_eps": 1e-6, "vocab_size": s["vocab"],
           "max_position_embeddings": 512, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "dflash_config": dcfg}
    if v2:  # DFlash2 ships sliding-window, non-causal layers
        cfg.update(is_causal=False, layer_types=["sliding_attention"] * num_layers, sliding_window=6,
                   use_sliding_window=True)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    save_file(t, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    return path


def test_dflash2_writer_uses_z_lab_names():
    """The names our random DFlash2 checkpoints use are exactly z-lab's (recorded from the published
    DFlash2 header: per-layer conv kernels, candidate selector codebooks without '.weight')."""
    import tempfile

    published_layer0 = {
        "attention_conv.base_kernel", "attention_conv.kernel_projection.weight", "input_layernorm.weight",
        "mlp.down_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp_conv.base_kernel",
        "mlp_conv.kernel_projection.weight", "post_attention_layernorm.weight", "self_attn.k_norm.weight",
        "self_attn.k_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight",
        "self_attn.q_proj.weight", "self_attn.v_proj.weight"}
    published_top = {"candidate_selector.hidden_projection.weight", "candidate_selector.predecessor_codebook",
                     "candidate_selector.successor_codebook", "fc.weight", "hidden_norm.weight", "norm.weight"}
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(f"{tmp}/t")
        with open(f"{tmp}/t/config.json", "w") as f:
            json.dump({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                       "intermediate_size": 128, "vocab_size": 320, "num_hidden_layers": 3}, f)
        write_dflash(f"{tmp}/d", f"{tmp}/t", [0, 2], v2=True)
        with safe_open(f"{tmp}/d/model.safetensors", "pt") as f:
            names = set(f.keys())
    assert {n[len("layers.0."):] for n in names if n.startswith("layers.0.")} == published_layer0
    assert {n for n in names if not n.startswith("layers.")} == published_top


ECHO_FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "echo_drafter")


def install_echo_plugin(where: str) -> str:
    """Make the third-party echo drafter package importable with its entry point, the way pip would
    (a .dist-info with METADATA and entry_points.txt, from its own pyproject), without pip or network.
    Returns the PYTHONPATH under which subprocesses see it; reloads ninfer's plugins in this process."""
    import importlib
    import sys

    import tomllib

    from ninfer import plugins

    with open(os.path.join(ECHO_FIXTURE, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    dist = os.path.join(where, f"{project['name'].replace('-', '_')}-{project['version']}.dist-info")
    os.makedirs(dist, exist_ok=True)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    with open(os.path.join(dist, "entry_points.txt"), "w") as f:
        for group, eps in project["entry-points"].items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    for p in (ECHO_FIXTURE, where):
        if p not in sys.path:
            sys.path.insert(0, p)
    importlib.invalidate_caches()
    plugins._loaded = False  # entry points are read once per process: read them again
    plugins.load_plugins()
    return os.pathsep.join([where, ECHO_FIXTURE])


def uninstall_echo_plugin(where: str) -> None:
    import importlib
    import sys

    from ninfer import plugins

    if plugins.pm.get_plugin("echo") is not None:
        plugins.pm.unregister(name="echo")
    plugins._dist_of.pop("echo", None)
    for p in (ECHO_FIXTURE, where):
        while p in sys.path:
            sys.path.remove(p)
    importlib.invalidate_caches()


def hidden_probe(drafter):
    """A drafter that reads the same hidden states but observes nothing, so they all stay available."""
    from ninfer.drafting import Drafter

    probe = Drafter()
    probe.uses_hidden, probe.target_layers = True, drafter.target_layers
    return probe
