# Session 24, call 4: the one-token int4 GEMV with a tile's warps in a cluster of 2 blocks (qmv1c / qmv1fc,
# NINFER_QMV_CLUSTER=1, opt-in): its GPU tests with the fixed-point ones; bench/qmv_balance.py (do 320-tile GEMVs lose
# to uneven blocks an SM, and do clusters help); the 27B W4A16 decode with and without, twice each in one process.
# Kernels compiled here with NVRTC 13.0 into .kc_s24 (bench/precompile_sm90.sh .kc_s24), carried.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python -m pytest -q tests/gpu/test_quant_kernels.py -k "cluster or fixed" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
tail -3 $OUT/tests.txt | cut -c1-300
timeout 100 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; echo rc $?; cut -c1-160 $OUT/balance.txt
D="default (per tile 1..8 tokens, split 9..16)"; C="int4 one token, few-tile weights in clusters of 2 blocks (NINFER_QMV_CLUSTER=1)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$C;$D;$C" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
