# Session 13, call 2: kvq_prefill (flash attention over the quantised KV codes; call 1 measured it with 4 warps a
# block, the next tile staged by cp.async, and without staging) at 8 warps (128 query rows) a block against 4 and
# against the dense pass (kvq_gather + SDPA): the prefill tests (every backend), bench/kv_prefill.py, then every
# quantised-KV kernel test. Kernels: .kc_s13c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== prefill tests"
timeout 200 python -m pytest -q -p no:cacheprovider -x tests/gpu/test_kv_quant_kernels.py -k "prefill and sm90" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
echo "== all quantised-KV tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py 2>&1 | grep -v "^ninfer: compiling" | tail -15
