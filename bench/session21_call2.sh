# Session 21, call 2 (H200): call 1's A/B (run on an H100) on the H200, where the int4 GEMV is bound by its products
# rather than by memory: GEMV only and end to end, the default against the copy-engine rings of 2 and 3 (-DQMV_BULK).
# Kernels: .kc_s21 (as call 1).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
D="default (per tile 1..8 tokens, split 9..16)"
timeout 100 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1 --variants "$D;bulk ring 2;bulk ring 3;$D" > $OUT/gemv.txt 2>&1
grep -E "^\||FAILED|Error|bandwidth|Traceback" $OUT/gemv.txt | cut -c1-200
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$D;bulk ring 2;bulk ring 3;$D" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback" $OUT/e2e.txt | cut -c1-220
