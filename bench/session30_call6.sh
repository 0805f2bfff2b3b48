# Session 30, call 6: down from the SwiGLU GEMV's fixed-point form (NINFER_QMV1F_DOWN=1, session 24's opt-in) with the
# group counts as acquire-release atomics (QMV_FOUT_SYNC=1), also with down launched after the sums (QMV_FOUT_LATE=1),
# against the default (down making its form per burst, qmv1x); the 27B end to end; the form's tests. Kernels: bash
# bench/precompile_sm90.sh .kc_s30; bash bench/precompile_quant_variants.sh .kc_s30 ";-DQMV_FOUT_SYNC=1;-DQMV_FOUT_SYNC=1 -DQMV_FOUT_LATE=1".
# Run it at commit 2828f9d: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "swiglu_writes_the_down_form" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; F="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
S="qmv1f, down from the SwiGLU GEMV's form counted by acquire-release atomics (QMV_FOUT_SYNC=1)"
SL="qmv1f, down from the SwiGLU GEMV's form, acquire-release count, down launched after the sums"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$F;$S;$SL;$D;$S;$SL" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
