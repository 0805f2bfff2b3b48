# Session 30, call 7: the SwiGLU GEMV (qmv1sf) letting down launch after its sums instead of right after its PDL wait
# (QMV_FOUT_LATE=1, as call 6's best form but with down making its own form, the default), both models. Kernels: bash
# bench/precompile_sm90.sh .kc_s30; bash bench/precompile_quant_variants.sh .kc_s30 ";-DQMV_FOUT_LATE=1" (qgemv.cu of 2828f9d).
# Run it at commit 8a057a2: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; L="the SwiGLU GEMV lets down launch after its sums, not after its wait (QMV_FOUT_LATE=1)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$L;$D;$L;$D;$L" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$L;$D;$L" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
