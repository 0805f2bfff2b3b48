# Session 36, call 3: bench/persist_mlp.py after call 2 (where the stage's last warp ran each unit's epilogue while
# every other warp waited for it: 0.27 of copy bandwidth), now one warp a stage, claimed in order, its unit's epilogue
# its own; the ring and consumer warps at three shapes (NINFER_PM_STAGES / NINFER_PM_CONSUMERS). Any GPU with sm_90;
# on an H200, bench/session36_call1.sh after it. Run it at the commit that adds it. Kernels: .kc_s36, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s36/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for sc in 10x10 11x8 11x11; do
  NINFER_PM_STAGES=${sc%%x*} NINFER_PM_CONSUMERS=${sc##*x} timeout 100 python bench/persist_mlp.py > $OUT/pm_$sc.txt 2>&1
  echo "stages x consumers $sc: rc $?"; grep -v compiling $OUT/pm_$sc.txt | tail -8 | cut -c1-250
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash bench/session36_call1.sh; fi
