# Session 14, call 9: kvq_prefill's head_dim-128 8-warp form (sm_86 / sm_89 / sm_120's) without the two-blocks register
# cap, and the quantised dense pass reading its dequantised copy in place (no second gather): the quantised-KV and
# attention kernel tests on every backend, bench/prefill_memory.py, bench/kv_prefill.py. Kernels: .kc_s14g.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14g/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py tests/gpu/test_attention.py tests/gpu/test_models.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== prefill memory"
timeout 100 python bench/prefill_memory.py sm90 2>&1 | grep -v "^ninfer: compiling"
echo "== kv prefill"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
