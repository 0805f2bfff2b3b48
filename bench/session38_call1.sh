# Session 38, call 1: bench/persist_mlp.py's FLOW=3 and BATCH=1 (session 37's call 5), and smaller units beside more
# stages (the same ring bytes), taken GRAB at a time. A reading to test: the consumers multiply a 16 KB unit a warp,
# about 7.5 us each on an H100; after a grid barrier every warp starts at once and no stage frees for that long, so
# the producer stops (a convoy). Units of 8 or 4 groups shorten that.
# Rows: FLOW BATCH UG STAGES GRAB, all with REL=1 and 10 consumer warps; each row prints today's launches of the same
# 64 blocks (CUDA graph) beside it, in the same process. Any GPU with sm_90. Kernels: .kc_s38
# (bash bench/precompile_sm90.sh .kc_s38), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for v in "1 0 16 10 1" "1 1 16 10 1" "3 1 16 10 1" "1 1 8 20 2" "3 1 8 20 2" "1 1 4 40 4" "1 1 8 20 1" "1 0 16 10 1"; do
  set -- $v; n=$((n+1))
  NINFER_PM_FLOW=$1 NINFER_PM_BATCH=$2 NINFER_PM_UG=$3 NINFER_PM_STAGES=$4 NINFER_PM_GRAB=$5 NINFER_PM_REL=1 \
    timeout 40 python bench/persist_mlp.py > $OUT/pm$n.txt 2>&1
  echo "row $n: flow $1 batch $2 ug $3 stages $4 grab $5: rc $?"; grep -v compiling $OUT/pm$n.txt | tail -6 | cut -c1-220
done
