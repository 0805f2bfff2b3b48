# Session 13, call 7: main as it stands (kvq_prefill in fp16 only, the default for quantised-KV prefill): the whole
# GPU conformance suite, then bench/kv_prefill.py. Kernels: .kc_s13h.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13h/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
