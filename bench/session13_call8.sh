# Session 13, call 8 (review): kvq_prefill.cuh's staged scale words from one constexpr (SASS of all 24 kvq_prefill
# entry points identical, cuobjdump here), and the 24-token-block test now asserts the dense pass ran: the
# quantised-KV kernel tests (every backend). Kernels: .kc_s13i.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s13i/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py 2>&1 | grep -v "^ninfer: compiling" | tail -4
