# Session 26, call 3: the int8 fixed-point GEMV (FIX8) restructured for bursts of several groups; its tests again;
# the 8B W8A16 decode: default (bursts of 4 chunks) against qmv1's fp16 products, FIX8 bursts of 8 chunks (80
# registers) and FIX8 asking L2 for its next 2 bursts before the PDL wait, A B C D A B. Kernels .kc_s26
# (bench/precompile_quant_variants.sh .kc_s26 ";-DQMV_FIX8_BURST=8 -DQMV_MAXREGF8=80;-DQMV_PREPF8=2").
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s26/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 70 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed_point_burst_kernel or int8_model" -p no:cacheprovider -x > $OUT/tests.txt 2>&1; echo tests rc $?
grep -E "passed|failed|Error|assert" $OUT/tests.txt | tail -8 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; F="int8 one token in fp16 (qmv1, NINFER_QMV1F_INT8=0, before session 26)"
B8="int8 fixed point, bursts of 8 chunks at 80 registers (QMV_FIX8_BURST=8)"; P2="int8 fixed point, the next 2 bursts into L2 before the PDL wait (QMV_PREPF8=2)"
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "8B W8A16 g128" --variants "$D;$F;$B8;$P2;$D;$F" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
