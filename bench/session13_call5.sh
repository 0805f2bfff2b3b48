# Session 13, call 5: kvq_prefill with 16 warps (256 query rows) a block at head_dim 64 / 128 (8 at 256), and the int4
# dequantisation in three instructions a value (nibbles in place in the mantissa, one FFMA): the quantised-KV kernel
# tests (every backend), then bench/kv_prefill.py (both forms, the dense pass, the bf16 peer). Kernels: .kc_s13f.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13f/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quantised-KV tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
