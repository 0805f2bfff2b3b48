# Session 15, call 3: NINFER_GEMV_PRE=1 (the one-token bf16 GEMVs' first round of weights loaded before the PDL wait)
# is the default now; A/B against 2 (two rounds) and 0 (L2 prefetch, before), one process per shape; the conformance
# suite on every backend; then the issue-5 benchmark at 512 and 8K with transformers in the same call.
# Kernels: .kc_s15c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== decode A/B"
timeout 200 python bench/decode.py --shapes llama3-8b,qwen3-8b --ctx 512 --new 128 --prefill-repeats 1 --opts "/-DNINFER_GEMV_PRE=2/-DNINFER_GEMV_PRE=0//-DNINFER_GEMV_PRE=2" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed 's/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1//'
echo "== conformance"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -3
echo "== bench"
timeout 170 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed 's/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1 opts=..//'
echo "== transformers"
timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | tail -6
