# Session 39, call 2 (run inline on call 1's warm H100, commit ce6a59e): NINFER_PM_BATCH=1, call 1's winner, with
# FLOW=2, with DIAG=3 (no barrier or norm before gate_up; outputs wrong), and with 11 stages for 8 consumer warps.
# Every row has REL=1 and BATCH=1. Kernels: .kc_s38, carried.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0
while read -r row; do
  n=$((n+1))
  env NINFER_PM_REL=1 NINFER_PM_BATCH=1 $row timeout 40 python bench/persist_mlp.py > $OUT/q$n.txt 2>&1
  echo "row $n: $row: rc $?"; grep -v compiling $OUT/q$n.txt | grep -E "CHECK|persistent|launches|Error|error" | tail -5 | cut -c1-200
done <<'ROWS'
NINFER_PM_FLOW=2
NINFER_PM_FLOW=1 NINFER_PM_DIAG=3
NINFER_PM_FLOW=2 NINFER_PM_STAGES=11 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=1 NINFER_PM_STAGES=11 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=2
NINFER_PM_FLOW=1
ROWS
