# Session 8, device call 3: decode one step ahead of the host (ninfer.engine.pipeline) — its GPU tests, then
# bench/decode.py (the pipelined loop reported, beside the plain loop and the graph replayed back to back) and
# bench/quant.py e2e, transformers in the same call. Kernels precompiled here (bench/precompile_sm90.sh .kc_s8b).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s8b}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"; timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_models.py > $OUT/models_tests.txt 2>&1; echo rc $?; tail -3 $OUT/models_tests.txt
echo "== decode, bf16"; timeout 300 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 --capacity 32768 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee $OUT/decode.txt
echo "== quant e2e"; timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||host gap|FAILED|Error"
echo "== transformers (peer)"; timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep RESULT
