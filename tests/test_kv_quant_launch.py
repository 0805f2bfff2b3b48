"""The quantised-KV kernels' launchers, without a GPU: every GPU backend registers write_kv and paged_attention
for each quantised KV format (kernel names in its library), and input the kernels were not written for (here:
CPU tensors) runs the reference ops of ninfer.quant.kv_ops, bit for bit. The kernels themselves are checked
on the GPU (tests/gpu/test_kv_quant_kernels.py)."""

from __future__ import annotations

import torch

from ninfer.backends import installed_backends
from ninfer.kernels.kv_quant import KVQ_FORMATS, make_kv_quant_ops
from ninfer.ops import all_impls
from ninfer.quant import kv_ops
from ninfer.quant.kv_cache import make_pool


def _gpu_backends():
    return {n: c for n, c in installed_backends().items() if getattr(c, "kernels", None) is not None}


def test_every_gpu_backend_registers_both_ops_per_format():
    impls = all_impls()
    for name, cls in _gpu_backends().items():
        for fmt in KVQ_FORMATS:
            for op in ("write_kv", "paged_attention"):
                mine = [i for i in impls if i.backend == name and i.op == op and i.kv_format == fmt]
                assert len(mine) == 1 and "kvq_" in mine[0].name, (name, op, fmt)
        names = cls.kernels.kernel_names()
        suffixes = ["f16"] + (["bf16"] if torch.bfloat16 in cls.kernels.dtypes else [])
        for s in suffixes:
            assert f"kvq_write_{s}_d128" in names and f"kvq_attention_{s}_d256_b4_r8" in names
            assert f"kvq_prefill_{s}_d256_b4_w8" in names and f"kvq_prefill_{s}_d64_b8_w16" in names


def test_cpu_input_falls_back_to_the_reference():
    lib = next(iter(_gpu_backends().values())).kernels
    ops = make_kv_quant_ops(lib)
    torch.manual_seed(0)
    Hq, Hk, D, bs = 8, 2, 128, 16
    for fmt in KVQ_FORMATS:
        got = [make_pool(fmt, key, 4, bs, Hk, D, "cpu") for key in (True, False)]
        want = [make_pool(fmt, key, 4, bs, Hk, D, "cpu") for key in (True, False)]
        k, v = torch.randn(2, 30, Hk, D)
        slots = torch.arange(30)
        ops["write_kv"](k, v, *got, slots)
        kv_ops.write_kv(k, v, *want, slots)
        assert torch.equal(got[0].data, want[0].data) and torch.equal(got[1].scale, want[1].scale)
        q = torch.randn(3, Hq, D)
        bt, pos = torch.arange(4, dtype=torch.int32), torch.arange(27, 30)
        assert torch.equal(ops["paged_attention"](q, *got, bt, pos, 0.1), kv_ops.paged_attention(q, *want, bt, pos, 0.1))


def test_prefill_has_a_form_within_turings_shared_memory():
    """kvq_prefill's Turing build (sm75: tiles of 32 keys, 16 at head_dim 256) has a form for every head_dim and code
    width within sm_75's 64 KB a block (less what the launcher keeps for the kernel's static bytes), so a quantised prefill there reads the codes
    in the kernel too; the sm_80+ forms would not fit (99 KB and up at head_dim 128 and 256)."""
    from ninfer.kernels.kv_quant import prefill_smem, prefill_warps

    for D in (64, 128, 256):
        for bits in (8, 4):
            fit = [w for w in prefill_warps(D) if prefill_smem(D, bits, w, turing=True) <= 64 * 1024 - 16]
            assert fit, (D, bits)
            if D > 64:
                assert all(prefill_smem(D, bits, w) > 64 * 1024 for w in prefill_warps(D)), (D, bits)
