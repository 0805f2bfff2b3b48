# Session 31, call 3 (H200): the GPU conformance suite at main's commit (every backend that runs on sm_90: sm90, and
# sm75 / sm86 / sm89 through their sources compiled for sm_90), the first full run on an H200 since session 11.
# Kernels: call 1's (.kc_s31).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 560 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/tests.txt 2>&1; echo "rc $?"
grep -E "passed|failed|FAILED|Error" $OUT/tests.txt | tail -15 | cut -c1-250
