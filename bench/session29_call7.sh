# Session 29, call 7 (prepared for an H200, if one is lent): the final defaults end to end, both models, against the
# attention before this session and the gate's own launch, transformers beside. Kernels: bash bench/precompile_sm90.sh .kc_s29.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; B8="decode attention in blocks of <= 8 query rows (before session 29)"
G="the output gate in its own launch (sigmoid_mul, before session 29)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$B8;$G;$D;$B8;$G" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 80 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 80 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
