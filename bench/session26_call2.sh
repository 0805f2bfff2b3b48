# Session 26, call 2: the final norm's fixed-point form for lm_head (NINFER_QMV1F_HEAD) against lm_head from the bf16
# row, 27B W4A16 and 8B W8A16, int8 and int4 lm_heads, A B A B in one process (call 1: the 27B with an int4 lm_head
# 1.5-3 % below session 25's H100 figures). Kernels as call 1 (.kc_s26).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s26/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; H="lm_head from the bf16 row (NINFER_QMV1F_HEAD=0)"
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$H;$D;$H" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 70 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$H;$D;$H" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
