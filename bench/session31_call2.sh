# Session 31, call 2 (H200): the one-token GEMVs that read rows no norm made (the 27B's down: 0.73 of copy bandwidth
# in call 1's timeline, the weakest), in the forms kept as bench variants, both models. Kernels as call 1 (.kc_s31).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; F="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
X0="no qmv1x (NINFER_QMV1X=0, before session 27)"; X1="one token without a form makes it from the row (qmv1x, NINFER_QMV1X=1)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$F;$X0;$D;$F;$X0" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 130 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$X1;$F;$D;$X1" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
