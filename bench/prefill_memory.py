"""What one layer's prefill attention allocates beyond its output, by context: the per-token slope beside the capacity
planner's figure (``ninfer.quant.capacity.prefill_copy_bytes_per_token``). Qwen3.5-27B-shaped heads (24 q / 4 kv of
256), a 256-token chunk at the end of L = 4K, 12K and 32K, a bf16 / fp16 cache and int8 / int4 caches through
kvq_prefill and through the dense pass (NINFER_KVQ_PREFILL=gather).

    python bench/prefill_memory.py [BACKEND ...]     (default: sm90 in bf16, sm75 in fp16)
"""

from __future__ import annotations

import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "gpu"))
import test_kv_quant_kernels as kvt  # noqa: E402  (its measurement, prefill_peak)

from ninfer.kernels import kv_quant  # noqa: E402
from ninfer.ops import DeviceSpec, resolve  # noqa: E402
from ninfer.quant.capacity import prefill_copy_bytes_per_token  # noqa: E402

HQ, HK, D, T, BS = 24, 4, 256, 256, 64
CTX = (4096, 12288, 32768)


def main(backends):
    cfg = types.SimpleNamespace(num_heads=HQ, num_kv_heads=HK, head_dim=D)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| backend | dtype | KV | prefill | MB beyond the output at 4K / 12K / 32K | slope, bytes a token | planner |\n"
          "|---|---|---|---|---|---:|---:|")
    for backend in backends:
        dtype = torch.float16 if backend == "sm75" else torch.bfloat16
        for fmt, mode in (("bf16", "fused"), ("int8", "fused"), ("int4", "fused"), ("int8", "gather"),
                          ("int4", "gather")):
            kv_quant.PREFILL_MODE = mode
            ops = resolve(backend, DeviceSpec.of(torch.device("cuda"), dtype), kv_format=fmt)
            peaks = [kvt.prefill_peak(ops, fmt, dtype, HQ, HK, D, T, L, BS) for L in CTX]
            want = prefill_copy_bytes_per_token(cfg, fmt, dtype, torch.cuda.get_device_capability(), BS)
            label = "dense" if fmt == "bf16" else ("kvq_prefill" if mode == "fused" else "dense pass")
            print(f"| {backend} | {str(dtype)[6:]} | {fmt} | {label} | {' / '.join(f'{p / 1e6:.1f}' for p in peaks)} | "
                  f"{(peaks[-1] - peaks[0]) / (CTX[-1] - CTX[0]):.0f} | {want} |", flush=True)
    kv_quant.PREFILL_MODE = "fused"


if __name__ == "__main__":
    main(sys.argv[1:] or ["sm90", "sm75"])
