# Session 8, device call 2: how much of a decode step is the host's (bench/decode.py and bench/quant.py now also time
# the decode graph replayed back to back, no host work between). Kernels precompiled here with NVRTC 13.0
# (bench/precompile_sm90.sh .kc_s8b).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s8b}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== decode, bf16"; timeout 240 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --capacity 32768 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee $OUT/decode.txt
echo "== quant e2e"; timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||host gap|FAILED|Error"
echo "== transformers (peer)"; timeout 120 python bench/peers/transformers_decode.py 8b 27b 2>&1 | tail -4
