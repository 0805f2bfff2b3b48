# Session 37, call 1: bench/persist_mlp.py, session 36's call 4 rows (not run then) and NINFER_PM_FLOW=2, new: no
# grid barrier at all. The last down tile of each 128-group of the residual row makes the group's form of h * w for
# the next layer's gate_up and its sum of squares, and flags it; gate_up's units wait for their groups' flags; the
# norm's scale is applied in SwiGLU's epilogue. Does taking every barrier and the per-block norm off the GEMV
# boundaries win back what call 3 (session 36) lost? Rows: default (barriers), FLOW=1, FLOW=2, and the measurement
# rows (outputs wrong): DIAG 3 (no barriers, norm or form copy), 2 (no products or epilogues), 1 (no products).
# NINFER_PM_REL=1 (FLOW 2 and default): the epilogues' counts as acq_rel atomics, no fence.sc around them.
# NINFER_PM_AHEAD=8 (FLOW 2 and default): the producer takes its units 8 ahead of the stages it fills and asks L2
# for each when taken, so the weight stream goes on into L2 while the consumers wait.
# Each row prints today's launches of the same 64 blocks (CUDA graph) beside it, in the same process.
# Any GPU with sm_90. Ran at e551f8d (FLOW 2 rows failed there: a misaligned shared-memory buffer, fixed in call 2's commit). With REL 0 and AHEAD 0 the FLOW 0 / 1 PTX
# is ce4b91a's but for register numbers, one fence placed after an address computation, and a few selects reordered.
# Kernels: .kc_s37 (bash bench/precompile_sm90.sh .kc_s37), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s37/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0; for v in "10 10 16 0 2 0 0" "10 10 16 0 0 0 0" "10 10 16 0 1 0 0" "10 10 16 0 2 1 0" "10 10 16 0 0 1 0" "10 10 16 0 2 0 8" "10 10 16 0 0 0 8" "10 10 16 3 0 0 0" "10 10 16 2 0 0 0" "10 10 16 1 0 0 0" "10 10 16 0 2 0 0"; do
  set -- $v; n=$((n+1))
  NINFER_PM_STAGES=$1 NINFER_PM_CONSUMERS=$2 NINFER_PM_UG=$3 NINFER_PM_DIAG=$4 NINFER_PM_FLOW=$5 NINFER_PM_REL=$6 NINFER_PM_AHEAD=$7 timeout 60 python bench/persist_mlp.py > $OUT/pm${n}_$1_$2_$3_$4_$5_$6_$7.txt 2>&1
  echo "stages $1, consumers $2, groups a unit $3, diag $4, flow $5, rel $6, ahead $7: rc $?"; grep -v compiling $OUT/pm${n}_$1_$2_$3_$4_$5_$6_$7.txt | tail -7 | cut -c1-250
done
