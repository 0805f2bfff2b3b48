# Session 12, call 5: the conformance suite on main with the prefill dequantisation kernels (qdeq_*, qdeqr_*,
# kvq_gather), then prefill attention over quantised KV caches with kvq_gather against the torch ops before it and
# the bf16 cache (bench/kv_prefill.py). Kernels: .kc_s12d (every backend: kv_quant.cuh changed).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | grep -E "passed|failed|FAILED|Error" | head -20
echo "== kv prefill"
timeout 200 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
