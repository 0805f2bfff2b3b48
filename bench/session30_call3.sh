# Session 30, call 3: the norm-in-GEMV tail letting the next kernel launch after its stores (QMV_NORM_LATE=1) against
# the tail as call 2 ran it and the default, the 27B end to end and in the timeline, the 8B end to end. Kernels: bash
# bench/precompile_sm90.sh .kc_s30 and bash bench/precompile_quant_variants.sh .kc_s30 ";-DQMV_NORM_LATE=1".
# Run it at commit f429232: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; N="the norms in the GEMVs' last block (NINFER_QMV_NORM=1)"
L="the norms in the GEMVs' last block, the next kernel launched after the stores (QMV_NORM_LATE=1)"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$L;$D;$N;$L" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$L;$D;$L" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 100 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --variants "$L" > $OUT/tl27.txt 2>&1
grep -vE "^\s*$" $OUT/tl27.txt | grep -v Warn | head -30 | cut -c1-180
