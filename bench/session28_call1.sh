# Session 28, call 1: where the quantised decode step's time goes inside its CUDA graph with PDL on (bench/timeline.py),
# both models, beside the e2e default and transformers. Kernels: bash bench/precompile_sm90.sh .kc_s28.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 200 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --steps 20 > $OUT/tl27.txt 2>&1
cat $OUT/tl27.txt | grep -v "^\s*$" | head -60 | cut -c1-230
timeout 150 python bench/timeline.py --models "8B W8A16 g128" --lm-head int8 --steps 20 > $OUT/tl8.txt 2>&1
cat $OUT/tl8.txt | grep -v "^\s*$" | head -40 | cut -c1-230
timeout 100 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
