# Session 37, call 3: bench/persist_mlp.py after call 2 (H100, against today's launches at 0.884-0.914 of copy
# bandwidth in the same processes: FLOW=1 REL=1 0.825-0.831, the best; REL=1 0.812; FLOW=2 REL=1 0.779-0.783, its
# gate_up units each copying ~13 groups of the form from L2; without REL FLOW=2 0.660; units taken ahead, even only
# while the consumers are behind, 0.60-0.66). New, NINFER_PM_CACHE=1: a unit's groups of its flagged input form go
# into one copy in the block's shared memory, each group once a layer (marked with its layer), instead of every
# unit copying all its groups into its warp's buffer. Rows: FLOW=1 REL=1 without and with CACHE, FLOW=2 REL=1 with
# CACHE, REL=1 with both barriers; the CACHE rows twice. Each row prints today's launches of the same 64 blocks
# (CUDA graph) beside it, in the same process.
# Any GPU with sm_90. Ran at 59ea310. Kernels: .kc_s37, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s37/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for v in "1 0" "1 1" "2 1" "0 0" "1 1" "2 1"; do
  set -- $v; n=$((n+1))
  NINFER_PM_FLOW=$1 NINFER_PM_CACHE=$2 NINFER_PM_REL=1 timeout 40 python bench/persist_mlp.py > $OUT/pm${n}_$1_$2.txt 2>&1
  echo "row $n: flow $1, cache $2, rel 1: rc $?"; grep -v compiling $OUT/pm${n}_$1_$2.txt | tail -7 | cut -c1-250
done
