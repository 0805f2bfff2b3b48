"""Plugins: registered at run time they are listed and used; a broken one is reported and skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import torch

import ninfer
from ninfer import plugins
from ninfer.backends import Backend, backend_statuses, choose_backend
from ninfer.ops import DeviceSpec, OpImpl, resolve


class CpuTestBackend(Backend):
    name = "cputest"
    description = "a test backend that claims the CPU"

    @classmethod
    def check(cls, device):
        return (True, "claims the CPU for the test", 10) if device.type == "cpu" else (False, "CPU only", 0)


calls = []


def doubled_silu_mul(x):
    calls.append(x.shape)
    from ninfer.reference.ops import silu_mul

    return silu_mul(x)


class TestPlugin:
    @ninfer.hookimpl
    def ninfer_register_backends(self, register):
        register(CpuTestBackend)

    @ninfer.hookimpl
    def ninfer_register_ops(self, register):
        register(OpImpl(op="silu_mul", backend="cputest", fn=doubled_silu_mul, name="test.silu_mul"))


def test_runtime_plugin_is_listed_and_used():
    pm = plugins.load_plugins()
    plugin = TestPlugin()
    pm.register(plugin, name="test-plugin")
    try:
        names = [p["name"] for p in plugins.list_plugins()]
        assert "test-plugin" in names
        listed = next(p for p in plugins.list_plugins() if p["name"] == "test-plugin")
        assert "ninfer_register_ops" in listed["hooks"] and "ninfer_register_backends" in listed["hooks"]
        # it can run here, and auto prefers it over reference (higher fit score)
        assert any(s.name == "cputest" and s.can_run for s in backend_statuses(torch.device("cpu")))
        assert choose_backend("auto", torch.device("cpu"))[0] == "cputest"
        ops = resolve("cputest", DeviceSpec.of("cpu", torch.float32))
        assert ops.explain()["silu_mul"] == "cputest:test.silu_mul"
        assert ops.explain()["rms_norm"].startswith("reference:")  # not registered: falls back
        ops.silu_mul(torch.randn(3, 8))
        assert calls == [torch.Size([3, 8])]
    finally:
        pm.unregister(plugin)
    assert choose_backend("auto", torch.device("cpu"))[0] != "cputest"


def test_broken_plugin_is_reported_and_skipped(tmp_path):
    dist = tmp_path / "brokenplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ninfer]\nbrokenplug = brokenplug_mod\n")
    (tmp_path / "brokenplug_mod.py").write_text("raise RuntimeError('this plugin is broken on purpose')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "ninfer.cli", "plugins", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    broken = [p for p in items if p["name"] == "brokenplug"]
    assert broken and "broken on purpose" in broken[0]["error"]
    assert any(p["name"] == "ninfer.reference" for p in items)  # the rest still loaded
    # and the engine still works beside it
    r = subprocess.run([sys.executable, "-m", "ninfer.cli", "backends", "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["auto"]["name"] == "reference"


def test_allowlist_env_restricts_entry_points(tmp_path):
    code = textwrap.dedent("""
        import json
        from ninfer import plugins
        print(json.dumps([p["name"] for p in plugins.list_plugins()]))
    """)
    env = dict(os.environ, NINFER_LOAD_PLUGINS="")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    names = json.loads(r.stdout)
    assert names and all(n.startswith("ninfer.") for n in names)  # the core's built-ins only
    env = dict(os.environ, NINFER_LOAD_PLUGINS="sm90")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert set(json.loads(r.stdout)) - set(names) == {"sm90"}
    assert r.stderr == ""
    env = dict(os.environ, NINFER_LOAD_PLUGINS="sm90,sm9O")  # a typo is named, with what is installed
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert set(json.loads(r.stdout)) - set(names) == {"sm90"}
    assert "NINFER_LOAD_PLUGINS names sm9O," in r.stderr and "sm89" in r.stderr and r.stderr.count("\n") == 1


def test_backends_json_shape():
    r = subprocess.run([sys.executable, "-m", "ninfer.cli", "backends", "--json"], capture_output=True, text=True,
                       timeout=120)
    out = json.loads(r.stdout)
    assert {"backends", "auto"} <= set(out)
    ref = next(b for b in out["backends"] if b["name"] == "reference")
    assert ref["can_run"] is True
    assert out["auto"]["name"] == "reference"  # no GPU here
    for b in out["backends"]:
        if b["name"].startswith("sm"):
            assert b["can_run"] is False and b["why"]
