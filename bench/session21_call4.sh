# Session 21, call 4 (H200): today's end-to-end baseline (27B W4A16 with an int8 and an int4 lm_head, 8B W8A16) beside
# transformers (bf16, the same shapes), then
# which pipe throttles the one-token int4 GEMV on the H200: the default and its products alone (-DQMV_DIAG=3).
# Kernels: .kc_s21 (sm90 backend; quant default and -DQMV_DIAG=3 at ac8ab9b; NVRTC 13.0 here).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --variants "default (per tile 1..8 tokens, split 9..16)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback" $OUT/e2e.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|^transformers"  # the peer
# which pipe throttles the int4 GEMV's products (call 1's H100 counters: math-pipe throttle and wait stalls in DIAG=3)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M="regex:^sm__(inst_executed_pipe_[a-z0-9_]+|pipe_[a-z0-9_]+_cycles_active)\.avg\.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
for E in "" "-DQMV_DIAG=3"; do
  echo "=== build: '$E'"
  NCU_EXTRA="$E" NCU_QUANT_ONLY=1 timeout 45 $NCU --clock-control none -k regex:'qmv1_bf16_sf16_b4' --launch-skip 2 --launch-count 2 \
    --metrics "$M" python bench/ncu_gemv.py > $OUT/ncu_pipes$(echo $E | tr -d "=-").txt 2>&1; echo rc $?
  grep -E "qmv1|pipe|stalled|issue_active|duration|dram" $OUT/ncu_pipes$(echo $E | tr -d "=-").txt | awk '$NF+0 >= 0.5 || /qmv1/' | sed -E 's/ +/ /g' | cut -c1-110 | head -50
done
