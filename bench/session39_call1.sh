# Session 39, call 1: session 38's prepared call 1 (bench/session38_call1.sh: NINFER_PM_COOP, NINFER_PM_FLANE) and
# session 37's prepared call 5 (bench/session37_call5.sh: NINFER_PM_FLOW=3, NINFER_PM_BATCH=1) in one call, since
# neither ran (no machine was lent). Every row has REL=1 and prints today's launches of the same 64 MLP blocks (CUDA
# graph) beside it, in the same process. Any GPU with sm_90; persist_mlp.py as of commit dcba7bb (or later, with
# these options unchanged). Kernels: .kc_s38 (bash bench/precompile_sm90.sh .kc_s38), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0
while read -r row; do
  n=$((n+1)); t0=$(date +%s)
  env NINFER_PM_REL=1 $row timeout 40 python bench/persist_mlp.py > $OUT/pm$n.txt 2>&1
  echo "row $n: $row: rc $? ($(( $(date +%s) - t0 )) s)"; grep -v compiling $OUT/pm$n.txt | tail -6 | cut -c1-200
done <<'ROWS'
NINFER_PM_FLOW=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=2 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1 NINFER_PM_STAGES=9
NINFER_PM_FLOW=1 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
NINFER_PM_FLOW=3
NINFER_PM_FLOW=3 NINFER_PM_BATCH=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1
ROWS
