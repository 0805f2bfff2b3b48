# Session 17 (prepared, not yet run), call 3: Nsight Compute counters of the one-token int4 / int8 GEMVs (27B gate_up
# and down, 8B gate_up), the default build against the persistent int4 form (QMV_PERSIST) and the pipelined register
# form (QMV_PIPE + QMV_XFIRST): stall reasons, issue rate, SM clock. Kernels: .kc_s17a.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s17a/* $NINFER_KERNEL_CACHE/
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
for E in "" "-DQMV_PERSIST=1" "-DQMV_PIPE=1 -DQMV_XFIRST=1 -DQMV_MAXREG4=96 -DQMV_MAXREG8=80"; do
  echo "=== build: '$E'"
  NCU_EXTRA="$E" NCU_QUANT_ONLY=1 timeout 150 $NCU --clock-control none -k regex:'qmv' --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    python bench/ncu_gemv.py > $OUT/ncu.txt 2>&1; echo rc $?
  grep -E "^  [a-z_0-9]+.*\(|^int|Duration|DRAM Throughput|SM Frequency|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|Eligible Warps|Stall|stall" $OUT/ncu.txt | cut -c1-170 | head -80
done
