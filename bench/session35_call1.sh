# Session 35, call 1: on an H200 (the goals' GPU; every call since session 31 was served by an H100), the variants
# measured only on H100s since: -DQMV_FIX_M16=1 (the int4 fixed-point products without the nibble shifts, level on an
# H100) and -DQMV_CLUSTER=1 (the 320-tile GEMVs in clusters of 2 blocks, 3.3-3.5 % slower on an H100), end to end;
# bench/qmv_balance.py (do the 320-tile grids lose to uneven blocks an SM on the H200?); bench/chain_bound.py (does
# today's launch structure stream near 0.9 of copy bandwidth on the H200 too, as on the H100?); the 8B default.
# On any other GPU nothing (its first try, on an H100, ran chain_bound's ring at 12 x 16 KB, 6 x 32 KB and 24 x 8 KB).
# Run it at commit 9d7a496 (the model code and kernels of dc8e240, with the two bench builds; main since
# removed them) with bench/chain_bound.py and bench/pdl_handoff.py of d3dbbb0 and this script checked out over it:
#     git checkout 9d7a496 && git checkout d3dbbb0 -- bench/chain_bound.py bench/pdl_handoff.py
# (as the device branch of session 35 did). Its first try, on an H100, ran the ring rows of session 34's call 2
# instead; the second, on an H100 too, nothing.
# Kernels: bash bench/precompile_sm90.sh .kc_s35; bash bench/precompile_quant_variants.sh .kc_s35 ";-DQMV_CLUSTER=1;-DQMV_FIX_M16=1".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  D="default (per tile 1..8 tokens, split 9..16)"; C="the 320-tile GEMVs in clusters of 2 blocks (qmv1fc / qmv1xc, QMV_CLUSTER)"
  M="int4 fixed-point products without the nibble shifts (QMV_FIX_M16)"
  timeout 240 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$M;$C;$D;$M;$C" > $OUT/e2e27.txt 2>&1
  grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
  timeout 90 python bench/chain_bound.py > $OUT/chain.txt 2>&1; cut -c1-220 $OUT/chain.txt | grep -v compiling | tail -20
  timeout 100 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; grep -E "^\||GPU|Error|Traceback" $OUT/balance.txt | cut -c1-200
  timeout 80 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$D" > $OUT/e2e8.txt 2>&1
  grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
else
  echo "not an H200: nothing run (its rows ran on an H100 in this session's first try)"
fi
