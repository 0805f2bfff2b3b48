"""Programmatic dependent launch (PDL), checked without a GPU: every entry point of the shared kernels waits for
its predecessor (griddepcontrol.wait) when compiled for sm_90, the instruction is compiled out below sm_90, the
GEMVs ask L2 for their first weights before the wait, and the launcher asks for PDL only for sm_90+ modules.
The GPU half (PDL on == off, bit for bit, eager and graph-replayed) is tests/gpu/test_ops.py::test_pdl_*."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backends" / "ninfer-sm90" / "src"))

import cuda.bindings.nvrtc  # noqa: E402,F401  (requirements-test.txt installs it)

from ninfer.kernels.launch import Module, _launch_config, pdl_capable  # noqa: E402
from ninfer.kernels.nvrtc import compile_ptx  # noqa: E402


def entries(ptx: str) -> dict[str, str]:
    """Entry-point name -> its PTX body."""
    parts = re.split(r"\.entry\s+", ptx)[1:]
    return {p.split("(")[0].strip(): p for p in parts}


@pytest.fixture(scope="module")
def sm90_ptx() -> dict[str, str]:
    import ninfer_sm90

    lib = ninfer_sm90.LIBRARY
    return entries(compile_ptx(lib.source(), "ninfer_sm90", "sm_90", lib.options, (str(lib.source_path.parent),)))


def test_every_entry_point_waits_for_its_predecessor(sm90_ptx):
    import ninfer_sm90

    names = set(ninfer_sm90.LIBRARY.kernel_names())
    assert names <= set(sm90_ptx), sorted(names - set(sm90_ptx))
    no_wait = [n for n, body in sm90_ptx.items() if "griddepcontrol.wait" not in body]
    no_trigger = [n for n, body in sm90_ptx.items() if "griddepcontrol.launch_dependents" not in body]
    assert no_wait == [] and no_trigger == []


def test_gemvs_prefetch_weights_before_the_wait(sm90_ptx):
    for name in ("gemv_bf16_t1", "gemv_bf16_t1_k4", "gemv_bf16_t1_k2", "gemv_silu_t1_bf16", "gemv_f16_t1"):
        body = sm90_ptx[name]
        assert "prefetch.global.L2" in body, name
        assert body.index("prefetch.global.L2") < body.index("griddepcontrol.wait"), name
        # a GEMV lets the next kernel launch only once it streams: one GEMV ahead at most
        assert body.index("griddepcontrol.wait") < body.index("griddepcontrol.launch_dependents"), name
    # the forms with the next round in flight load their first round into registers there (gemv.cuh:
    # NINFER_GEMV_PRE 1): weight loads (past L1) before the wait, and no activation read before it
    for name in ("gemv_bf16_t1_r2_k2", "gemv_bf16_t1_r2_k1", "gemv_silu2_t1_bf16", "gemv_gdn_in_bf16_t1_r2_k2"):
        body = sm90_ptx[name]
        wait = body.index("griddepcontrol.wait")
        loads = re.findall(r"ld\.global[.\w:]*", body[:wait])
        assert loads and all("no_allocate" in op for op in loads), (name, loads)
        assert wait < body.index("griddepcontrol.launch_dependents"), name
    # a kernel that reads only activations touches nothing before its wait
    for name in ("rms_norm_bf16", "add_rms_norm_zc_bf16", "sigmoid_mul_bf16", "argmax_part_f32"):
        body = sm90_ptx[name]
        assert body.index("griddepcontrol.wait") < body.index("ld.global"), name
        assert body.index("griddepcontrol.wait") < body.index("griddepcontrol.launch_dependents"), name


def test_griddepcontrol_is_compiled_out_below_sm90():
    src = '#include <ninfer/common.cuh>\nextern "C" __global__ void k(float *x) { ninfer::pdl_enter(); x[0] = 1.f; }\n'
    assert "griddepcontrol.wait" in compile_ptx(src, "t", "sm_90")
    assert "griddepcontrol.wait" in compile_ptx(src, "t", "sm_120")
    for arch in ("sm_75", "sm_86", "sm_89"):
        assert "griddepcontrol" not in compile_ptx(src, "t", arch), arch


def test_the_launch_follows_the_compiled_arch():
    assert [pdl_capable(a) for a in ("sm_75", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")] == \
        [False, False, False, True, True, True]
    assert not pdl_capable(None)  # a module that does not declare its kernels PDL-aware (a bench variant)
    assert Module.__init__.__defaults__ == ("", None)  # PDL only where the caller asks for it


def test_the_pdl_launch_config():
    from cuda.bindings import driver

    c = _launch_config(7, 2, 1, 128, 1, 1, 4096, 0)
    assert (c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.sharedMemBytes, c.numAttrs) == (7, 2, 1, 128, 4096, 1)
    a = c.attrs[0]
    assert a.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert a.value.programmaticStreamSerializationAllowed == 1


def test_the_cluster_launch_config():
    from cuda.bindings import driver

    c = _launch_config(8, 16, 1, 128, 1, 1, 0, 0, True, (1, 16, 1))
    assert c.numAttrs == 2
    assert c.attrs[0].id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    a = c.attrs[1]
    assert a.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z) == (1, 16, 1)
    c = _launch_config(8, 16, 1, 128, 1, 1, 0, 0, False, (1, 8, 1))  # NINFER_PDL=0: the cluster alone
    assert c.numAttrs == 1 and c.attrs[0].id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


def test_the_switch(monkeypatch):
    import subprocess

    code = "from ninfer.kernels import launch; print(launch.PDL)"
    for val, want in (("0", "False"), ("1", "True"), ("", "True")):
        env = {"NINFER_PDL": val, "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want, (val, out.stderr)


def test_quantised_gemvs_wait_after_their_first_weights():
    """The int8/int4 GEMVs (ninfer.quant, their own module) launch with PDL too: every entry point waits before it
    reads activations or writes, and the tensor-core ones load their first chunks of weights before the wait."""
    from ninfer.quant import gpu

    ptx = entries(compile_ptx(gpu.SOURCE.read_text(), "ninfer_qgemv", "sm_90", gpu.options("sm_90"),
                              (gpu._include_dir(),)))
    assert set(gpu.kernel_names("sm_90")) <= set(ptx)
    for name, body in ptx.items():
        assert "griddepcontrol.wait" in body and "griddepcontrol.launch_dependents" in body, name
        assert body.index("griddepcontrol.wait") < body.index("griddepcontrol.launch_dependents"), name
    for name in (gpu.mma_kernel_name(torch.bfloat16, torch.bfloat16, 4, False, 8),
                 gpu.mma_kernel_name(torch.bfloat16, torch.float16, 8, True, 16),
                 gpu.mma_kernel_name(torch.bfloat16, torch.float16, 4, False, 16, split=True)):
        body = ptx[name]
        assert body.index("ld.global.nc") < body.index("griddepcontrol.wait"), name


def test_decode_attention_reads_the_old_cache_before_its_wait(sm90_ptx):
    """The sm90 backend builds with NINFER_PDL_EARLY_LOADS 1: the one-pass decode split, the one-launch cluster form
    and the combine read what earlier launches wrote (positions, block table, K/V of past steps) before their wait,
    and write nothing before it; the other attention entry points wait first, and so do these built with
    -DNINFER_PDL_EARLY_LOADS=0 (tests/gpu/test_attention.py::test_attention_right_after_the_kv_write_in_a_graph
    checks the result)."""
    import ninfer_sm90

    lib = ninfer_sm90.LIBRARY
    late = entries(compile_ptx(lib.source(), "ninfer_sm90", "sm_90", lib.options + ("-DNINFER_PDL_EARLY_LOADS=0",),
                               (str(lib.source_path.parent),)))
    early_ones = ("attention_split1_bf16_d128", "attention_split1_f16_d64", "attention_combine_bf16",
                  "attention_cluster16w4_bf16_d128", "attention_cluster8w8_f16_d256")
    for name in early_ones:
        body = late[name]
        assert body.index("griddepcontrol.wait") < body.index("ld.global"), name
    for name in early_ones:
        body = sm90_ptx[name]
        wait = body.index("griddepcontrol.wait")
        assert body.index("ld.global") < wait, name
        assert "st.global" not in body[:wait], name
        # the combine lets the next kernel (the o projection's GEMV, which reads only weights before its own wait)
        # launch first (kernels.cuh: NINFER_COMBINE_EARLY_TRIGGER); the others after their wait
        trigger = body.index("griddepcontrol.launch_dependents")
        assert (trigger < wait) if name.startswith("attention_combine") else (wait < trigger), name
    for name in ("attention_split_bf16_d256", "attention_split_combine_bf16_d128"):
        body = sm90_ptx[name]
        assert body.index("griddepcontrol.wait") < body.index("ld.global"), name


def test_the_cluster_attention_switch(monkeypatch):
    """NINFER_ATTN_CLUSTER: off by default and for 0 / off, a cluster form by name (kernels in every backend's
    library), one sentence naming the choices for anything else."""
    import pytest

    from ninfer.errors import NinferError
    from ninfer.kernels import attention
    from ninfer.kernels.library import ATTN_CLUSTER_FORMS

    monkeypatch.delenv("NINFER_ATTN_CLUSTER", raising=False)
    assert attention.cluster_form() is None
    for off in ("0", "off", ""):
        monkeypatch.setenv("NINFER_ATTN_CLUSTER", off)
        assert attention.cluster_form() is None
    for form in ATTN_CLUSTER_FORMS:
        monkeypatch.setenv("NINFER_ATTN_CLUSTER", form)
        assert attention.cluster_form() == form
    assert [attention._cluster_shape(f) for f in ATTN_CLUSTER_FORMS] == [(16, 4), (8, 8), (16, 8)]
    monkeypatch.setenv("NINFER_ATTN_CLUSTER", "cluster32w4")
    with pytest.raises(NinferError, match="cluster16w4, cluster8w8, cluster16w8 or 0"):
        attention.cluster_form()
    import ninfer_sm90

    names = set(ninfer_sm90.LIBRARY.kernel_names())
    assert {f"attention_{f}_bf16_d128" for f in ATTN_CLUSTER_FORMS} <= names
