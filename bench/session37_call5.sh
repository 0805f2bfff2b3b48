# Session 37, call 5: bench/persist_mlp.py's NINFER_PM_FLOW=3, new: no grid barrier at all (as FLOW=2: the last
# down tile of each 128-group of residual rows makes the group's form of h * w and its sum of squares for the next
# layer and flags it), but gate_up's units read the form from one copy the block makes in shared memory once all 40
# groups are flagged (FLOW=2's units each copied their ~13 groups; FLOW=1 makes the norm in every block after a grid
# barrier). Each block counts its copy done, and a layer's next form is written only once every block has.
# Beside FLOW=1 REL=1, the best form so far (calls 2-4: 0.825-0.838 of copy bandwidth, 7 % behind today's launches).
# Each row prints today's launches of the same 64 blocks (CUDA graph) beside it, in the same process.
# Any GPU with sm_90. Run it at the commit that adds this script. Kernels: .kc_s37, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s37/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for f in 3 1 3; do
  n=$((n+1))
  NINFER_PM_FLOW=$f NINFER_PM_REL=1 timeout 40 python bench/persist_mlp.py > $OUT/pm${n}_$f.txt 2>&1
  echo "row $n: flow $f, rel 1: rc $?"; grep -v compiling $OUT/pm${n}_$f.txt | tail -7 | cut -c1-250
done
