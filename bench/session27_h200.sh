# Prepared for the next device call on an H200 (session 27 ran on H100s only): the final defaults (qmv1x for int4,
# FIX8 predicated) against no qmv1x and qmv1x for int8 too, A B C A B C in one process, both models, transformers
# beside. Kernels: bash bench/precompile_sm90.sh .kc_s27 (no -D builds needed).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s27/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; A="one token without a form makes it from the row (qmv1x, NINFER_QMV1X=1)"
O="no qmv1x (NINFER_QMV1X=0, before session 27)"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$A;$O;$D;$A;$O" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$A;$D;$A" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
