# Session 10, call 4: main after the norm-in removal (conformance), the o projection streamed into L2 during decode
# attention (NINFER_GEMV_PREFETCH_MB, -DNINFER_COMBINE_EARLY_TRIGGER) A/B, decode of the three shapes beside
# transformers. Precompiled here: bash bench/precompile_sm90.sh .kc_s10d && bash bench/precompile_variants.sh .kc_s10d
# "-DNINFER_COMBINE_EARLY_TRIGGER"; carry [".kc_s10d"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s10d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 170 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -8
echo "== A/B"
timeout 150 python bench/whatif.py --shape llama3-8b --ctx 512 --variants base,pf40,ctrig,pf40+ctrig,cluster16w4+pf40,pf64+ctrig,base 2>&1 | grep RESULT
timeout 80 python bench/whatif.py --shape qwen3-8b --ctx 512 --variants base,pf40+ctrig,cluster16w4+pf40 2>&1 | grep RESULT
timeout 60 python bench/whatif.py --shape llama3-8b --ctx 8192 --variants base,pf40+ctrig 2>&1 | grep RESULT
echo "== decode"
timeout 170 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 2>&1 | grep -E "RESULT|FAILED|copy bandwidth"
echo "== transformers"
timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|transformers "
