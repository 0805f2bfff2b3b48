# Ran at commit a7416fd (the w8t16 form, reverted after this call: slower than w4, bench/RESULTS.md session 14).
# Session 14, call 3: kvq_prefill's new head_dim-256 form w8t16 (8 warps, 16-key tiles, 93 KB: what sm_86 / sm_89's
# 99 KB allow instead of the 4-warp form) beside w8 (sm_90's) and w4 (sm_86 / sm_89's before): the quantised-KV kernel
# tests on every backend, then bench/kv_prefill.py at the Qwen3.5-27B shape. Kernels: .kc_s14c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== kvq tests"
timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 --shapes 27b 2>&1 | grep -v "^ninfer: compiling"
