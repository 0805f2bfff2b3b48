# Session 33, call 1: (1) the residual add and RMSNorm after the mixers' output projections and after down with no
# launch of their own (QMV_NORMIN: that GEMV stores h = y + r and each block's sum of h^2; each block of the next GEMV
# normalises h and makes the token's fixed-point form in its shared memory), the norms being 11 % of the 27B step in
# session 31's H200 timeline and about half that net; (2) session 32's prepared -DQMV_FIX_M16=1 (the int4 fixed-point
# products without the nibble shifts, same bits). Their GPU tests first; 27B W4A16 (int4 lm_head) and 8B W8A16 (int8).
# Run it at commit 29368e5: these builds were removed from main after the session's measurements.
# Kernels: the sm90 backend's from bench/precompile_sm90.sh, and
# bash bench/precompile_quant_variants.sh .kc_s33 ";-DQMV_NORMIN=1;-DQMV_FIX_M16=1".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s33/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "normin or fix_m16" > $OUT/tests.txt 2>&1; grep -E "passed|failed|Error" $OUT/tests.txt | tail -12 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; N="the add and norm in the GEMVs around them (QMV_NORMIN)"
B="the -DQMV_NORMIN=1 build, not taken"; M="int4 fixed-point products without the nibble shifts (QMV_FIX_M16)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$M;$B;$D;$N;$M" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$N;$D;$N" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
