# Session 36, call 3: bench/persist_mlp.py after call 2 (where the stage's last warp ran each unit's epilogue while
# every other warp waited for it: 0.27 of copy bandwidth), now one warp a stage, claimed in order, its unit's epilogue
# its own; the ring and consumer warps at two shapes (NINFER_PM_STAGES / NINFER_PM_CONSUMERS), 8 KB units (NINFER_PM_UG=8), and
# the consumers skipping their products (NINFER_PM_DIAG=1) and also their epilogues (2): outputs wrong. Any GPU with sm_90;
# on an H200, bench/session36_call1.sh after it. Run it at 9ac6e8b, the commit that last changes it (where it ran).
# Kernels: .kc_s36, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s36/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for v in "10 10 16 0" "11 11 16 0" "20 10 8 0" "10 10 16 1" "10 10 16 2"; do
  set -- $v
  NINFER_PM_STAGES=$1 NINFER_PM_CONSUMERS=$2 NINFER_PM_UG=$3 NINFER_PM_DIAG=$4 timeout 100 python bench/persist_mlp.py > $OUT/pm_$1_$2_$3_$4.txt 2>&1
  echo "stages $1, consumers $2, groups a unit $3, diag $4: rc $?"; grep -v compiling $OUT/pm_$1_$2_$3_$4.txt | tail -7 | cut -c1-250
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash bench/session36_call1.sh; fi
