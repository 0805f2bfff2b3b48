# Session 29, call 2: the 27B and 8B decode steps kernel by kernel (bench/timeline.py) with the output gate in the
# combine; the 8B (4 q heads a kv head, one-pass already) in blocks of <= 2 query rows; transformers beside.
# Kernels: bash bench/precompile_sm90.sh .kc_s29 (as call 1).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --steps 20 > $OUT/tl27.txt 2>&1
grep -v "^\s*$" $OUT/tl27.txt | head -45 | cut -c1-230
D="default (per tile 1..8 tokens, split 9..16)"; R2="attention in blocks of <= 2 query rows (BLOCK_ROWS=2)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$R2;$D;$R2" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 120 python bench/timeline.py --models "8B W8A16 g128" --lm-head int8 --steps 20 > $OUT/tl8.txt 2>&1
grep -v "^\s*$" $OUT/tl8.txt | head -30 | cut -c1-230
timeout 100 python bench/peers/transformers_decode.py 8b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
