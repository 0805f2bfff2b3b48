# Session 22, call 3: the warp-specialised one-token int4 GEMV (bench/kernels/qmv_ws.cu) against main's qmv1 on the
# 27B shapes: correctness (float32 reference, qmv1) and time beside the copy bandwidth. Kernels: .kc_s21 (main's)
# and .kc_ws (bench/qmv_ws.py --precompile sm_90 with the builds below, NVRTC 13.0 here).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* .kc_ws/*.cubin $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 300 python bench/qmv_ws.py --builds="-DWS_CONTIG=1,-DWS_CONTIG=1 -DWS_DIAG=1,-DWS_CONTIG=1 -DWS_NS=6 -DWS_DIAG=1,-DWS_CONTIG=1 -DWS_SC=8 -DWS_NS=8 -DWS_DIAG=1,-DWS_CONTIG=1 -DWS_SC=8 -DWS_NS=8" \
  > $OUT/qmv_ws.txt 2>&1; echo rc $?
cat $OUT/qmv_ws.txt | tail -30
