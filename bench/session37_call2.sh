# Session 37, call 2: bench/persist_mlp.py after call 1 (H100: default 0.738-0.741 of copy bandwidth against
# 0.877-0.888 for today's launches; with no grid barriers, norm or form copy, outputs wrong, 0.966-0.967: the GEMV
# boundaries are the whole loss; REL=1 0.773-0.778; FLOW=2 failed at a misaligned shared-memory buffer, now fixed).
# Rows: FLOW=2 (no grid barrier at all: each gate_up / down unit waits on flags of its own 128-groups' input form),
# with and without REL=1 (acq_rel counts; now also no fence.sc around the grid barriers), and default / FLOW=1 with
# REL=1; AHEAD=8 with WHEN_FULL=1 (call 1's AHEAD=8, always 8 ahead, lost 16 %: a reading, each unit's way to its
# stage 8 units longer, which every GEMV boundary waits for): units taken ahead and asked of L2 only while the
# consumers are behind (the next stage's fill in, not taken). FLOW=2 with more stages than consumer warps (11 x 8,
# 12 x 6: FLOW 2 needs no shared copy of the input form), so that arrived fills wait in stages no blocked warp holds.
# Each row prints today's launches of the same 64 blocks (CUDA graph) beside it, in the same process.
# Any GPU with sm_90. Ran at 5c006cf. Kernels: .kc_s37, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s37/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for v in "10 10 0 2 1 0 0" "10 10 0 2 0 0 0" "10 10 0 0 1 0 0" "10 10 0 1 1 0 0" "10 10 0 2 1 8 1" "10 10 0 0 1 8 1" "11 8 0 2 1 0 0" "12 6 0 2 1 0 0" "10 10 0 0 0 0 0" "10 10 0 2 1 0 0"; do
  set -- $v; n=$((n+1))
  NINFER_PM_STAGES=$1 NINFER_PM_CONSUMERS=$2 NINFER_PM_DIAG=$3 NINFER_PM_FLOW=$4 NINFER_PM_REL=$5 NINFER_PM_AHEAD=$6 NINFER_PM_WHEN_FULL=$7 timeout 40 python bench/persist_mlp.py > $OUT/pm${n}_$1_$2_$3_$4_$5_$6_$7.txt 2>&1
  echo "row $n: stages $1, consumers $2, diag $3, flow $4, rel $5, ahead $6, when full $7: rc $?"; grep -v compiling $OUT/pm${n}_$1_$2_$3_$4_$5_$6_$7.txt | tail -7 | cut -c1-250
done
