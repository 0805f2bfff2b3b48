# Session 39, call 3 (ran at commit 6bcf428): bench/persist_mlp.py's form warp (NINFER_PM_FLANE=1) with
# NINFER_PM_FSEEN=1 (commit 993b38b): it reads a group's flag only until it has seen it for the layer, and fences only
# after a unit whose flags it read (call 1's FLANE rows read every unit's flags and fenced with a fence.sc after each,
# and lost: 0.68 of copy). And NINFER_PM_PFQ (commit c6c7fb8): while the ring is full in gate_up's first 2 STAGES fills
# (the consumers at its grid barrier), the producer takes up to PFQ units ahead and asks L2 for them. Beside call 2's
# best form (FLOW=1 BATCH=1). Every row has REL=1 and prints today's launches of the same 64 MLP blocks beside it, in
# the same process. Any GPU with sm_90. Kernels: .kc_s38 (bash bench/precompile_sm90.sh .kc_s38), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0
while read -r row; do
  n=$((n+1))
  env NINFER_PM_REL=1 $row timeout 40 python bench/persist_mlp.py > $OUT/r$n.txt 2>&1
  echo "row $n: $row: rc $?"; grep -v compiling $OUT/r$n.txt | grep -E "CHECK|persistent|launches|Error|error" | tail -5 | cut -c1-200
done <<'ROWS'
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=4
NINFER_PM_FLOW=1 NINFER_PM_FLANE=1
NINFER_PM_FLOW=2 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=2
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=4
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
ROWS
