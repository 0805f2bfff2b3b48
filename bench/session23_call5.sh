# Session 23, call 5: which GEMVs take the fixed-point form in the 4-layer model (debug), and the failing GPU tests.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s23/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python bench/debug_fixed.py 2>&1 | grep -v "^rows.*served False attr False" | tail -30
timeout 200 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
tail -5 $OUT/tests.txt | cut -c1-300
