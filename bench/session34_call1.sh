# Session 34, call 1: session 33's call 2 (QMV_NORMIN with its consumers' prologue issuing every load at once; NORMIN
# with the producers' residual copied ahead, -DQMV_NORM_RPRE=1; on an H200 also -DQMV_FIX_M16=1), then
# bench/chain_bound.py: the decode step's weight stream with no GEMV work, as today's separate PDL launches and as one
# persistent kernel (a cp.async.bulk ring in shared memory running ahead of grid barriers), for the 27B W4A16 and the
# 8B W8A16: what bounds the chain, and whether a persistent step could reach the goals' bandwidth.
# Run it at commit 4040650 (session 33's call 2 code) with bench/chain_bound.py of 011bead added (main's times
# its graph through bench/timing.py and takes its separate launches' kernels from bench/pdl_handoff.py: the same kernels).
# Kernels: bash bench/precompile_sm90.sh .kc_s34 and
# bash bench/precompile_quant_variants.sh .kc_s34 ";-DQMV_NORMIN=1;-DQMV_NORMIN=1 -DQMV_NORM_RPRE=1;-DQMV_FIX_M16=1".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s34/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python bench/chain_bound.py > $OUT/chain.txt 2>&1; cut -c1-220 $OUT/chain.txt | tail -20
D="default (per tile 1..8 tokens, split 9..16)"; N="the add and norm in the GEMVs around them (QMV_NORMIN)"
M="int4 fixed-point products without the nibble shifts (QMV_FIX_M16)"; R="QMV_NORMIN, the producers' residual copied ahead (QMV_NORM_RPRE)"
V27="$D;$N;$R;$D;$N;$R"; if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then V27="$D;$N;$R;$M;$D;$N;$R;$M"; fi
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$V27" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 80 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$N;$R;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 100 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "normin" > $OUT/tests.txt 2>&1; grep -E "passed|failed|Error" $OUT/tests.txt | tail -12 | cut -c1-300
