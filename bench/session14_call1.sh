# Session 14, call 1: the quantised one-token GEMV with fp16 activations against bf16 (the int4 dequantisation in
# fp16 needs one shift a word instead of three), GEMV only and end to end. Kernels: .kc_s14a (main's).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for dt in bf16 fp16 bf16 fp16; do
  echo "== gemv $dt"
  timeout 150 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --act-dtype $dt 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | grep -v cuBLAS | head -20
done
for dt in bf16 fp16; do
  echo "== e2e $dt"
  timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "27B W4A16 g128" --act-dtype $dt 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
done
