# Session 38, call 1: bench/persist_mlp.py. A reading to test: the consumers multiply a 16 KB unit a warp, about
# 7.5 us each on an H100; after a grid barrier every warp starts at once and no stage frees for that long, so the
# producer stops (a convoy). NINFER_PM_COOP=1: every warp takes every stage, a share of its groups, so a stage frees
# about every 0.75 us. NINFER_PM_FLANE=1: a form warp waits for each unit's flagged groups of its input form and
# bulk-copies them into the unit's stage.
# Every row has REL=1; each prints today's launches of the same 64 blocks (CUDA graph) beside it, in the same
# process. Any GPU with sm_90; persist_mlp.py as of commit 5d0a542 to ce6a59e: COOP and FLANE were taken out
# at 72a730b, after session 39's call 1 ran these rows (bench/session39_call1.sh). Kernels: .kc_s38
# (bash bench/precompile_sm90.sh .kc_s38), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0
while read -r row; do
  n=$((n+1))
  env NINFER_PM_REL=1 $row timeout 40 python bench/persist_mlp.py > $OUT/pm$n.txt 2>&1
  echo "row $n: $row: rc $?"; grep -v compiling $OUT/pm$n.txt | tail -6 | cut -c1-200
done <<'ROWS'
NINFER_PM_FLOW=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=2 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1 NINFER_PM_STAGES=9
NINFER_PM_FLOW=1 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1
ROWS
