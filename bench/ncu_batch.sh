# Session 5: Nsight Compute counters of the decode GEMVs (bench/ncu_gemv.py). Kernels precompiled here into $KC.
KC=${KC:-.kc_s6}
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp $KC/* $NINFER_KERNEL_CACHE/
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
timeout 240 $NCU --clock-control none -k regex:'gemv|qmma|qmsk' --launch-skip 7 --launch-count 7 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis python bench/ncu_gemv.py > $OUT/ncu.txt 2>&1; echo rc $?
grep -E "^  [a-z_0-9]+.*\(|^bf16|^int|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Reg|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Active Warps Per|Eligible Warps|L2 Hit|Stall|stall|cycles being stalled|Mem Busy|Max Bandwidth" $OUT/ncu.txt | cut -c1-170 | head -190
