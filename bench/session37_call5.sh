# Session 37, call 5 (prepared; no device time was left to run it): bench/persist_mlp.py's two new options beside
# FLOW=1 REL=1, the best form so far (calls 2-4: 0.825-0.838 of copy bandwidth, 7 % behind today's launches).
# NINFER_PM_FLOW=3: no grid barrier at all (as FLOW=2: the last down tile of each 128-group of residual rows makes
# the group's form of h * w and its sum of squares for the next layer and flags it), but gate_up's units read the
# form from one copy the block makes in shared memory once all 40 groups are flagged (FLOW=2's units each copied
# their ~13 groups; FLOW=1 makes the norm in every block after a grid barrier). Each block counts its copy done, and
# a layer's next form is written only once every block has.
# NINFER_PM_BATCH=1: a unit's copy of its flagged groups of the form issues all its loads, then its stores (the PTX
# before had a load and its store in turn, with branches and divisions between: up to 8 round trips to L2 a lane,
# for every down unit under FLOW=1).
# Each row prints today's launches of the same 64 blocks (CUDA graph) beside it, in the same process.
# Any GPU with sm_90. Run it at the commit that last changed this script (or later, if persist_mlp.py's builds named
# here are unchanged). Kernels: .kc_s38 (bash bench/precompile_sm90.sh .kc_s38 at the commit it runs at), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for v in "1 0" "1 1" "3 0" "3 1" "2 1" "1 1" "1 0"; do
  set -- $v; n=$((n+1))
  NINFER_PM_FLOW=$1 NINFER_PM_BATCH=$2 NINFER_PM_REL=1 timeout 40 python bench/persist_mlp.py > $OUT/pm${n}_$1_$2.txt 2>&1
  echo "row $n: flow $1, batch $2, rel 1: rc $?"; grep -v compiling $OUT/pm${n}_$1_$2.txt | tail -7 | cut -c1-250
done
