# Session 13, call 4: kvq_prefill's staging and dequantisation with constant address steps a thread (a thread keeps
# one piece of every key it handles; paging by shifts), about 1 090 instructions a tile a warp at head_dim 128 instead
# of ~1 450, the softmax scale folded into the exponent's FFMA: the prefill tests (every backend), bench/kv_prefill.py, then the whole GPU conformance suite.
# Kernels: .kc_s13e.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== prefill tests"
timeout 200 python -m pytest -q -p no:cacheprovider -x tests/gpu/test_kv_quant_kernels.py -k "prefill" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== kv prefill bench"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
echo "== conformance"
timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
