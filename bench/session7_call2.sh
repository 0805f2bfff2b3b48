# Session 7, device call 2: the second GEMV sweep (bench/gemv_lab.py --set 2: first round loaded before the PDL
# wait with every split), back to back and with an RMSNorm kernel between GEMVs as in a decoder layer (--gap).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s7a/* .kc_s7lab/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== lab set 2"; timeout 150 python bench/gemv_lab.py --set 2 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab2.txt
echo "== lab set 2, gap"; timeout 150 python bench/gemv_lab.py --set 2 --gap 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab2gap.txt
echo "== lab set 1, gap"; timeout 150 python bench/gemv_lab.py --set 1 --gap 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab1gap.txt
