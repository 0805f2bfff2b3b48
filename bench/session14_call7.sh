# Session 14, call 7: the capacity planner's per-token prefill copies against the peak memory a prefill call allocates
# (tests/gpu/test_kv_quant_kernels.py: test_prefill_memory_per_context_token_is_what_the_planner_counts), with the rest
# of the quantised-KV kernel tests, every backend. Kernels: .kc_s14f (main's, unchanged since call 5).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14f/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
