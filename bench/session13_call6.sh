# Session 13, call 6: kvq_prefill's tiles and products in fp16 (the "h" forms: dequantisation two values a half2
# instruction, bf16 queries converted) against the query's dtype (float32 dequantisation): the quantised-KV kernel
# tests (every backend, both), bench/kv_prefill.py (each form, the dense pass, the bf16 peer). Kernels: .kc_s13g.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13g/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quantised-KV tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== kv prefill bench"
timeout 200 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
