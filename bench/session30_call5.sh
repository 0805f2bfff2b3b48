# Session 30, call 5: the 8B with the norm-in-GEMV tail counted by an acquire-release atomic and the late launch (call
# 4's best 27B form) against the default. Kernels as call 4.
# Run it at commit 1993e2c: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"
SL="the norms in the GEMVs' last block, acquire-release count, next kernel after the stores"
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$SL;$D;$SL;$D;$SL" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
