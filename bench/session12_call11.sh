# Session 12, call 11 (review): the three prefill dequantisation kernels (qdeq_*, qdeqr_*, kvq_gather) store through the
# shared pack8 instead of their own unions; their bit-for-bit tests and the quantised kernel suites on every backend.
# Kernels: .kc_s12g.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12g/* $NINFER_KERNEL_CACHE/
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py tests/gpu/test_kv_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -3
