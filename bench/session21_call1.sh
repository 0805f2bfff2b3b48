# (The -DQMV_BULK variants and their tests exist in commit a0258d8 only: run this script there.)
# Session 21, call 1: the one-token burst GEMV with each warp's bursts streamed by the copy engine into a ring of R
# shared-memory slots (-DQMV_BULK=R, new): its GPU tests (bit for bit the register form), GEMV only against the
# default, end to end (27B W4A16, 8B W8A16, int8 lm_head) against the default in the same process; then Nsight
# Compute's warp-stall breakdown of the default int4 / int8 GEMVs, their products alone (-DQMV_DIAG=3) and the ring
# of 3. Kernels: .kc_s21 (sm90 backend; quant default, -DQMV_DIAG=3 and the bulk variants; NVRTC 13.0 here).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k bulk 2>&1 | tail -4
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;bulk ring 2;bulk ring 3;bulk ring 4;bulk ring 3, 64 registers;bulk ring 2, 64 / 56 registers;$D"
timeout 150 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1 --variants "$V" 2>&1 | grep -E "^\||FAILED|Error|bandwidth|Traceback"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$D;bulk ring 3;bulk ring 4;$D" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M="regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$"
for E in "" "-DQMV_DIAG=3" "-DQMV_BULK=3"; do
  echo "=== build: '$E'"
  NCU_EXTRA="$E" NCU_QUANT_ONLY=1 timeout 60 $NCU --clock-control none -k regex:'qmv' --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --metrics "$M" python bench/ncu_gemv.py > $OUT/ncu$E.txt 2>&1; echo rc $?
  grep -vE "^==PROF==|^\s*$|----" $OUT/ncu$E.txt | awk '!/stalled/ || ($NF+0 >= 0.05)' | grep -vE "^    (OPT|INF|WRN) |^          " | cut -c1-140 | head -80
done
