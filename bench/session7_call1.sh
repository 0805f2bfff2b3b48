# Session 7, device call 1 (bench/RESULTS.md): the one-token bf16 GEMV structures of bench/gemv_lab.cu on the
# decode shapes, and where a 27B decode step's kernel time goes. Kernels precompiled here with NVRTC 13.0:
# backends in .kc_s6a (bench/precompile_sm90.sh), the lab in .kc_s7lab (gemv_lab.py --compile-only sm_90).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s6a/* .kc_s7lab/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== gemv lab"; timeout 240 python bench/gemv_lab.py 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab.txt
echo "== profile 27b"; NINFER_PDL=0 timeout 120 python bench/decode_profile.py --shape qwen3.5-27b --layers 8 --steps 5 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/prof27.txt | head -30
