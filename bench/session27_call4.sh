# Session 27, call 4: the GPU tests with qmv1x on by default for int4 weights: the model tests and the one-launch
# forms' bit-for-bit tests first (call 3 found two expectations to mend), then every GPU test but the bench variants'.
# Kernels: .kc_s27 (the same qgemv.cu as calls 2-3).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s27/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python -m pytest -q tests/gpu/test_quant_kernels.py -k "model_decodes_through or made_from_the_row or burst_kernel_with_swiglu or burst_kernel_with_gdn_in" -p no:cacheprovider > $OUT/tests1.txt 2>&1
echo "tests rc $?: $(grep -E "passed|failed" $OUT/tests1.txt | tail -1 | cut -c1-200)"; grep -E "^E  |^FAILED" $OUT/tests1.txt | head -8 | cut -c1-300
timeout 330 python -m pytest -q tests/gpu -k "not bench_variants" -p no:cacheprovider > $OUT/tests2.txt 2>&1
echo "all GPU tests rc $?: $(grep -E "passed|failed" $OUT/tests2.txt | tail -1 | cut -c1-200)"; grep -E "^FAILED" $OUT/tests2.txt | head -12 | cut -c1-250
