# Session 15, call 6: main as it stands (commit 9c3b2d6: GEMV_PRE 1, the combine's early trigger): issue 5's benchmark
# at 512 and 8K on the three shapes, transformers in the same call. Kernels: .kc_s15d.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== bench"
timeout 240 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed 's/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1 opts=..//'
echo "== transformers"
timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep RESULT
