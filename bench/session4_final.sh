# The integrator's final device call of session 4 (bench/RESULTS.md): run from the repo root on the H200 with the
# kernels precompiled here by `bash bench/precompile_sm90.sh .kc_s6` (carried in the ignored .kc_s6).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s6/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== conformance"; timeout 130 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12
echo "== decode"; timeout 170 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --capacity 32768 --prefill-repeats 3 --json $OUT/decode.json 2>&1 | grep -E "RESULT|FAILED|copy bandwidth" | sed 's/ gemv=auto pdl=1     norm=1 fused=1 opts=.*: decode/: decode/' | tee $OUT/decode.txt
echo "== peer"; timeout 80 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep -E "RESULT|FAILED|copy" | tee $OUT/peer.txt
echo "== quantised decode e2e"; timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head none,int8 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | tail -14
