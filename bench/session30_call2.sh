# Session 30, call 2: the norm-in-GEMV tail with its loads issued ahead (QMV_NORM_AHEAD=4, warp 0 alone fencing) against
# call 1's form and the default; the 27B's timeline with and without. Kernels: bash bench/precompile_sm90.sh .kc_s30 and
# bash bench/precompile_quant_variants.sh .kc_s30 "-DQMV_NORM_AHEAD=0".
# Run it at commit d9a415b: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 200 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "norm_in_the_gemv or norms_in_the_gemvs" > $OUT/tests.txt 2>&1; tail -4 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; N="the norms in the GEMVs' last block (NINFER_QMV_NORM=1)"
N0="the norms in the GEMVs' last block, one warp's loads at a time (QMV_NORM_AHEAD=0, call 1's form)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$N0;$D;$N" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 150 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --variants "$D;$N" > $OUT/tl27.txt 2>&1
grep -vE "^\s*$" $OUT/tl27.txt | head -80 | cut -c1-180
