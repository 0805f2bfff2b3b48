"""The grouped-int GEMV compiles with NVRTC (no GPU) for every arch the backends claim, with every
entry point the launcher calls, and is registered for each GPU backend by weight layout."""

import cuda.bindings.nvrtc  # noqa: E402,F401  (requirements-test.txt installs it; a missing one must fail)
import pytest
import torch

from ninfer.quant import gpu  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NINFER_KERNEL_CACHE", str(tmp_path / "kernels"))


@pytest.mark.parametrize("arch", ["sm_75", "sm_86", "sm_89", "sm_90", "sm_120"])
def test_qgemv_compiles(arch):
    assert ("-DQM_REG_RING" in gpu.options(arch)) == (arch != "sm_75")  # the register ring is the default build
    cubin = gpu.compile_for(arch, use_cache=False)
    assert cubin[:4] == b"\x7fELF"
    assert [k for k in gpu.kernel_names(arch) if k.encode() + b"\0" not in cubin] == []
    assert (b"qgemv_bf16" in cubin) == (arch != "sm_75")  # Turing serves fp16 only
    assert (b"qmsk_bf16_sf16_b4_sym_t8" in cubin) == (arch != "sm_75")  # the split form with the tensor-core one


@pytest.mark.parametrize("arch,extra", [("sm_86", ("-DQM_RAW",)), ("sm_90", ("-DQM_SMEM_RING",)),
                                        ("sm_90", ("-DQM_BENCH_ONLY", "-DQM_U=6")), ("sm_89", ("-DQSK_U8=2",)),
                                        ("sm_86", ("-DQMV_PERSIST=1",))])
def test_qmma_bench_variants_compile(arch, extra):
    """bench/quant.py's variants: offsets off by a second mma; the ring in shared memory; more loads in flight; the
    one-token int4 burst kernel as persistent blocks."""
    cubin = gpu.compile_for(arch, use_cache=False, extra=extra)
    names = gpu.kernel_names(arch) if "-DQM_BENCH_ONLY" not in extra else [
        gpu.mma_kernel_name(torch.bfloat16, torch.float16, b, False, t) for b in (4, 8) for t in gpu.MMA_WIDTHS]
    assert [k for k in names if k.encode() + b"\0" not in cubin] == []


def test_registered_for_every_gpu_backend():
    from ninfer.ops import all_impls

    got = {(i.backend, i.weight_layout) for i in all_impls() if i.op == "linear" and i.fn is gpu.quant_linear}
    assert got == {(b, lay) for b in gpu.BACKENDS for lay in ("int8_grouped", "int4_grouped")}


def test_gpu_params_fold_zero_points_into_offsets():
    from ninfer.quant.layout import dequantize, quantize_rtn, unpack_codes

    torch.manual_seed(0)
    for sym in (True, False):
        q = quantize_rtn(torch.randn(8, 64), 4, 32, sym, torch.float32)
        s, o = gpu.gpu_params(q)
        u = unpack_codes(q.qweight, 4).float().view(8, 2, 32)
        torch.testing.assert_close((u * s[..., None] + o[..., None]).view(8, 64), dequantize(q))
