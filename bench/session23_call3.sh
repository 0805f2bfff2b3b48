# Session 23, call 3: builds of the integer-tensor-core int4 GEMV (bench/kernels/qmv_i8.cu) against qmv1 on the 27B
# shapes (each with its products alone), then today's end-to-end baseline beside transformers.
# Kernels: .kc_s21 (main's, its -DQMV_DIAG=3 build, bench/qmv_i8.py --precompile sm_90 --builds as below; NVRTC 13.0).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s21/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 240 python bench/qmv_i8.py --builds=",-DI8_SPLIT=1,-DI8_MAXREG=80,-DI8_PIPE=1 -DI8_MAXREG=80,-DI8_SPLIT=1 -DI8_PIPE=1 -DI8_MAXREG=80,-DI8_B=8 -DI8_MAXREG=80,-DI8_SPLIT=1 @w8" > $OUT/qmv_i8.txt 2>&1; echo rc $?
tail -40 $OUT/qmv_i8.txt | cut -c1-200
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --variants "default (per tile 1..8 tokens, split 9..16)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback" $OUT/e2e.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
