# Session 19, call 2: today's baseline end to end with an int8 and an int4 lm_head (27B W4A16, 8B W8A16); kernel
# times of an eager decode step of each (8 layers, CUDA graphs off); Nsight Compute counters of the one-token int4 /
# int8 GEMVs, the default build against its products alone (-DQMV_DIAG=3: every burst's weights from L1).
# Kernels: .kc_s17a (as bench/session17_call1.sh).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s17a/* $NINFER_KERNEL_CACHE/
timeout 260 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128,8B W8A16 g128" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback"
timeout 120 python bench/quant.py --parts profile --no-qgemv --models "27B W4A16 g128,8B W8A16 g128" 2>&1 | grep -vE "^\s*$" | tail -40
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for E in "" "-DQMV_DIAG=3"; do
  echo "=== build: '$E'"
  NCU_EXTRA="$E" NCU_QUANT_ONLY=1 timeout 90 $NCU --clock-control none -k regex:'qmv' --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    python bench/ncu_gemv.py > $OUT/ncu.txt 2>&1; echo rc $?
  grep -E "^  [a-z_0-9]+.*\(|^int|Duration|DRAM Throughput|SM Frequency|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|Eligible Warps|Executed Ipc|Pipe|Stall|stall" $OUT/ncu.txt | cut -c1-150 | head -60
done
