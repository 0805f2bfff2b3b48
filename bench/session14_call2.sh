# Session 14, call 2: kvq_prefill's Turing form (the sm75 backend builds it: m16n8k8, staging without cp.async,
# tiles of 32 / 16 keys) and the sm_80+ forms: the quantised-KV kernel tests on every backend; the prefill bench on
# sm75 (fp16, Turing's form on this GPU) and sm90; Nsight Compute stall reasons of the one-token quantised GEMV.
# Kernels: .kc_s14b.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== kvq tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_kv_quant_kernels.py tests/gpu/test_models.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== kv prefill bench, sm75 fp16 (Turing's form on the H200) then sm90 bf16"
timeout 100 python bench/kv_prefill.py --backend sm75 --dtype fp16 --shapes 27b 2>&1 | grep -v "^ninfer: compiling"
timeout 100 python bench/kv_prefill.py --backend sm90 --shapes 27b --ctx 32768 2>&1 | grep -v "^ninfer: compiling"
echo "== ncu qmv1"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
timeout 200 $NCU --clock-control none -k regex:'qmv' --launch-skip 3 --launch-count 3 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  python bench/ncu_gemv.py > /tmp/ncu.txt 2>&1; echo rc $?
grep -E "qmv[a-z0-9_]*|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Warp Per|Eligible Warps|SM Frequency|stalled_[a-z_]*" /tmp/ncu.txt | grep -v " 0$\| 0\.0[0-9]*$" | cut -c1-150 | head -150
