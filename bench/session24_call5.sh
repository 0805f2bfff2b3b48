# Session 24, call 5 (prepared, not run: the device time was spent): the final default (qmv1f with predicated loads)
# against qmv1 and against down's form (opt-in) on the 27B W4A16 decode in one process, twice each; the 8B W8A16
# decode; transformers beside them. Kernels .kc_s24 (the quant library and the
# sm90 backend of commit 4e84581, the same cubins as calls 2-3).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; B="int4 one token in bf16 (qmv1, before qmv1f)"; N="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$B;$N;$D;$B;$N" > $OUT/e2e.txt 2>&1
timeout 60 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D" >> $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
