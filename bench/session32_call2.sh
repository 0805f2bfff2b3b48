# Session 32, call 2 (prepared, NOT RUN: no device was given for the rest of the session): the int4 one-token
# fixed-point GEMVs (qmv1f / qmv1sf / qmv1gf / qmv1x) with the high nibbles masked as 16 u instead of shifted
# (-DQMV_FIX_M16=1: 4 SHF fewer a chunk, the same bits), 27B W4A16 end to end; its GPU test first. On an H200 also
# bench/qmv_balance.py with call 1's cluster forms (call 1 ran on an H100).
# Kernels: bash bench/precompile_sm90.sh .kc_s32; bash bench/precompile_quant_variants.sh .kc_s32 ";-DQMV_CLUSTER=1;-DQMV_FIX_M16=1".
# Run it at commit 9d7a496: main does not have the -DQMV_FIX_M16 and -DQMV_CLUSTER builds or their tests.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s32/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 90 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "fix_m16" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"
M="int4 fixed-point products without the nibble shifts (QMV_FIX_M16)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$M;$D;$M" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 100 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; grep -E "^\||GPU|Error|Traceback" $OUT/balance.txt | cut -c1-200
fi
