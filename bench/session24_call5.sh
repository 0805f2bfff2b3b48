# Session 24, call 5: the final default (qmv1f with predicated loads; down's form and clusters off) against qmv1 on
# the 27B W4A16 and 8B W8A16 decode in one process, transformers beside it. Kernels .kc_s24 (the quant library and the
# sm90 backend of commit 4e84581, the same cubins as calls 2-3).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; B="int4 one token in bf16 (qmv1, before qmv1f)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128,8B W8A16 g128" --variants "$D;$B;$D" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
