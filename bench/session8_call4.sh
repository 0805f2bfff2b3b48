# Session 8, device call 4: conformance after the pipelined decode (tests/gpu, every backend), then decode with the
# engine's pipelined loop at 512 and 8K (one process a shape, so that the 27B fits at 8K), the quantised models,
# transformers in the same call. Kernels precompiled here (bench/precompile_sm90.sh .kc_s8b).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s8b}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 220 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12
for s in llama3-8b qwen3.5-27b qwen3-8b; do
  echo "== decode $s"; timeout 150 python bench/decode.py --shapes $s --ctx 512,8192 --new 128 --prefill-repeats 3 --capacity 32768 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee -a $OUT/decode.txt
done
echo "== quant e2e"; timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||host gap|FAILED|Error"
echo "== transformers (peer)"; timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep RESULT
