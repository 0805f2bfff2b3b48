# Session 28, call 12: the fixed-point forms' q through the reciprocal (one FMA) instead of a division per value
# (fixed_point.cuh fixed_q): GPU tests of every form, the norm alone (bench/pdl_handoff.py), A/B end to end against
# -DNINFER_FIXED_DIV=1. Kernels: precompile_sm90.sh .kc_s28, then precompile_variants.sh .kc_s28 "-DNINFER_FIXED_DIV=1".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 170 python -m pytest -q -x tests/gpu/test_quant_kernels.py tests/gpu/test_gdn_kernels.py tests/gpu/test_ops.py -k "fixed or norm_writes or model_decodes or sigmoid_mul" -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
timeout 60 python bench/pdl_handoff.py 2>&1 | grep -E "norm" | cut -c1-160
D="default (per tile 1..8 tokens, split 9..16)"; V="the forms' q through a division (-DNINFER_FIXED_DIV=1, before session 28)"
timeout 190 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$V;$D;$V;$D;$V" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 110 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$V;$D;$V" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
