# Prepared in session 23, run in session 24 (with QMV_FIXFETCH=2 added there): the fixed-point int4 forms (qmv1f, opt-in) against qmv1 on the H200, with the
# branch-free group loads (-DQMV_FIXFETCH=1) that bench/kernels/qmv_i8.cu has (0.94 of copy bandwidth on the 27B
# gate_up there against qmv1f's 0.84). Kernels: compile here first, into .kc_s24:
#     bash bench/precompile_sm90.sh .kc_s24
#     NINFER_KERNEL_CACHE=$PWD/.kc_s24 python -c "from ninfer.quant import gpu; [gpu.compile_for('sm_90', extra=e)
#         for e in [('-DQMV_FIXFETCH=1',), ('-DQMV_FIXFETCH=2',), ('-DQMV_DIAG=3',)]]"   (with PYTHONPATH / LD_PRELOAD as precompile_sm90.sh)
#     NINFER_KERNEL_CACHE=$PWD/.kc_s24 python bench/qmv_i8.py --precompile sm_90 --builds=-DI8_MAXREG=80
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 260 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "default (per tile 1..8 tokens, split 9..16);int4 one token in fixed point (qmv1f);qmv1f, branch-free group loads (QMV_FIXFETCH);qmv1f, predicated group loads (QMV_FIXFETCH=2)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 150 python bench/qmv_i8.py --builds="-DI8_MAXREG=80" --main-builds="-DQMV_FIXFETCH=1,-DQMV_FIXFETCH=2" > $OUT/qmv_i8.txt 2>&1; echo rc $?
grep -E "qmv1|I8_MAXREG|copy" $OUT/qmv_i8.txt | cut -c1-200
# Why qmv1f trails the bench kernel on gate_up: Nsight per kernel, qmv1 / qmv1f / qmvi8 on the two int4 shapes (and the
# int8 qmv1), each launched once after a warm-up (7 matching launches skipped).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M="smsp__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$"
NCU_FIXED=1 NCU_QUANT_ONLY=1 timeout 120 $NCU --clock-control none -k regex:'qmv1f_|qmvi8|qmv1_bf16' --launch-skip 7 \
  --launch-count 7 --metrics "$M" python bench/ncu_gemv.py > $OUT/ncu_fixed.txt 2>&1; echo rc $?
grep -E "qmv1|qmvi8|issue_active|duration|dram|warps_active|registers|stalled" $OUT/ncu_fixed.txt | awk '$NF+0 >= 0.5 || /qmv/' | sed -E 's/ +/ /g' | cut -c1-110 | head -80
