"""Every kernel of every backend compiles, with NVRTC and no GPU, for every arch the backend claims
(sm_75, sm_80/86, sm_89, sm_90, sm_120), and the cubin holds every entry point the launchers call."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ["sm75", "sm86", "sm89", "sm90", "sm120"]
for b in BACKENDS:  # the repo's sources, installed or not
    sys.path.insert(0, str(ROOT / "backends" / f"ninfer-{b}" / "src"))

import cuda.bindings.nvrtc  # noqa: E402,F401  (requirements-test.txt installs it; a missing one must fail)


def library(backend: str):
    return importlib.import_module(f"ninfer_{backend}").LIBRARY


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NINFER_KERNEL_CACHE", str(tmp_path / "kernels"))


def test_backends_claim_every_generation():
    claimed = {a for b in BACKENDS for a in library(b).arches}
    assert {"sm_75", "sm_86", "sm_89", "sm_90", "sm_120"} <= claimed


def test_turing_is_fp16_only():
    import torch

    assert library("sm75").dtypes == (torch.float16,)
    assert not any("bf16" in n for n in library("sm75").kernel_names())


@pytest.mark.parametrize("backend,arch", [(b, a) for b in BACKENDS for a in library(b).arches])
def test_every_kernel_compiles(backend, arch):
    lib = library(backend)
    cubin, cached = lib.compile(arch, progress=False)
    assert not cached
    assert cubin[:4] == b"\x7fELF"
    assert lib.missing_kernels(cubin) == []


def test_cache_hits_and_is_keyed_by_source(tmp_path):
    from ninfer.kernels.nvrtc import compile_cubin

    src = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 2.f; }\n'
    a, cached_a = compile_cubin(src, "t", "sm_86", progress=False)
    b, cached_b = compile_cubin(src, "t", "sm_86", progress=False)
    c, cached_c = compile_cubin(src + "// edited\n", "t", "sm_86", progress=False)
    assert (cached_a, cached_b, cached_c) == (False, True, False) and a == b
    assert len(list(Path(os.environ["NINFER_KERNEL_CACHE"]).glob("t-*sm_86*.cubin"))) == 2


def test_compile_error_names_the_source():
    from ninfer.errors import NinferError
    from ninfer.kernels.nvrtc import compile_cubin

    with pytest.raises(NinferError, match="could not compile bad for sm_90"):
        compile_cubin('extern "C" __global__ void k() { undefined_thing(); }', "bad", "sm_90", progress=False)


def test_cli_build_for_an_arch_reports_json():
    from click.testing import CliRunner

    from ninfer.backends import installed_backends
    from ninfer.kernels.cli import kernels

    res = CliRunner().invoke(kernels, ["build", "--arch", "sm_90", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    expected = sum(len(c.kernels.kernel_names()) for c in installed_backends().values()
                   if getattr(c, "kernels", None) is not None and "sm_90" in c.kernels.arches)
    from ninfer.quant import gpu as qgpu

    expected += len(qgpu.kernel_names("sm_90"))  # the quant GEMVs are built too
    assert out["arch"] == "sm_90" and out["compiled"] == expected
    assert any(b["backend"].startswith("quant") for b in out["backends"])


def test_cli_rejects_a_malformed_arch():
    from click.testing import CliRunner

    from ninfer.kernels.cli import kernels

    res = CliRunner().invoke(kernels, ["build", "--arch", "ampere"])
    assert res.exit_code != 0 and "write it as sm_XX" in res.output


def test_every_launcher_is_registered_as_an_op():
    """A launcher that make_ops builds but the backend hooks do not register never runs (the reference op
    serves its name instead): every one must be in the registered sets."""
    from ninfer.kernels.fused import FUSED_OPS
    from ninfer.kernels.ops import make_ops
    from ninfer.kernels.plugin import KERNEL_OPS

    launchers = set(make_ops(library("sm90")))
    registered = KERNEL_OPS | set(FUSED_OPS) | {"linear", "paged_attention"}
    assert launchers <= registered, f"launchers never registered: {sorted(launchers - registered)}"


def test_set_options_drops_loaded_modules_only_when_they_change(tmp_path):
    """Benchmarks switch a backend's build in one process (KernelLibrary.set_options): a module loaded under the old
    options must not serve the new ones, and the same options keep it."""
    import copy

    lib = copy.copy(library("sm90"))
    lib._modules = {0: "module loaded under the old options"}
    lib.set_options(lib.options)
    assert lib._modules == {0: "module loaded under the old options"}
    lib.set_options(lib.options + ("-DNINFER_PDL_EARLY_LOADS=0",))
    assert lib._modules == {} and lib.options[-1] == "-DNINFER_PDL_EARLY_LOADS=0"
