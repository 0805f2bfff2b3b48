# Session 30, call 4: the norm-in-GEMV tail counted by an acquire-release atomic (QMV_NORM_SYNC=1), also with the late
# launch, against call 2's tail and the default (27B end to end; its test of bits). Kernels: bash
# bench/precompile_sm90.sh .kc_s30; bash bench/precompile_quant_variants.sh .kc_s30 ";-DQMV_NORM_SYNC=1;-DQMV_NORM_SYNC=1 -DQMV_NORM_LATE=1".
# Run it at commit 41f0816: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "acquire_release" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; N="the norms in the GEMVs' last block (NINFER_QMV_NORM=1)"
S="the norms in the GEMVs' last block, counted by an acquire-release atomic (QMV_NORM_SYNC=1)"
SL="the norms in the GEMVs' last block, acquire-release count, next kernel after the stores"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$S;$SL;$D;$S;$SL" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
