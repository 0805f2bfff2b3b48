# Session 13, call 3: kvq_prefill with 2^x as one MUFU instruction, the output rows rescaled only where a warp's
# maximum grew, and 64-key tiles at head_dim 256 with 8 warps (32 with 4): the prefill tests (every backend),
# bench/kv_prefill.py (8 warps, 4 warps, the dense pass, the bf16 peer), then the whole GPU conformance suite.
# Kernels: .kc_s13d.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== prefill tests"
timeout 200 python -m pytest -q -p no:cacheprovider -x tests/gpu/test_kv_quant_kernels.py -k "prefill" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
echo "== conformance"
timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
