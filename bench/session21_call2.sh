# (The -DQMV_BULK variants and their tests exist in commit a0258d8 only: run this script there.)
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
# which pipe throttles the int4 GEMV's products (call 1's H100 counters: math-pipe throttle and wait stalls in DIAG=3)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M="regex:^sm__(inst_executed_pipe_[a-z0-9_]+|pipe_[a-z0-9_]+_cycles_active)\.avg\.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
for E in "" "-DQMV_DIAG=3"; do
  echo "=== build: '$E'"
  NCU_EXTRA="$E" NCU_QUANT_ONLY=1 timeout 60 $NCU --clock-control none -k regex:'qmv1_bf16_sf16_b4' --launch-skip 2 --launch-count 2 \
    --metrics "$M" python bench/ncu_gemv.py > $OUT/ncu_pipes$E.txt 2>&1; echo rc $?
  grep -E "qmv1|pipe|stalled|issue_active|duration|dram" $OUT/ncu_pipes$E.txt | awk '$NF+0 >= 0.5 || /qmv1/' | sed -E 's/ +/ /g' | cut -c1-110 | head -50
done
