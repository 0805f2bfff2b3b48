# Session 23, call 2: the one-token int4 GEMV with its products on the integer tensor cores (bench/kernels/qmv_i8.cu)
# against main's qmv1 on the 27B shapes: correctness, time, and each one's products alone.
# Kernels: .kc_s21 (main's, its -DQMV_DIAG=3 build, and bench/qmv_i8.py --precompile sm_90; NVRTC 13.0 here).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 400 python bench/qmv_i8.py > $OUT/qmv_i8.txt 2>&1; echo rc $?
tail -30 $OUT/qmv_i8.txt
