# Session 25, call 3: QMV_PREPF=2 now the default for the int4 one-token GEMVs only (call 2: +0.8-1.8 % on the 27B
# W4A16, -5 % on the int8 8B W8A16, on an H100): the default against the build without it (QMV_PREPF=0), A B A B,
# 27B and 8B; a few qmv1f checks. Kernels .kc_s25 (bench/precompile_quant_variants.sh .kc_s25 ";-DQMV_PREPF=0").
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s25/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 40 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed_point_burst_kernel_matches and 5120 or quantised_model_decodes" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?; tail -1 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; P0="no bursts into L2 before the PDL wait (QMV_PREPF=0, before session 25)"
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$P0;$D;$P0" > $OUT/e2e.txt 2>&1
timeout 45 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$P0" >> $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-200
