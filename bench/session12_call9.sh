# Session 12, call 9: a later prefill chunk's SDPA reads each KV head for its query heads (enable_gqa) instead of
# K and V repeated to the query heads first: the attention tests, bench/kv_prefill.py (both forms, bf16 and
# quantised caches), and the bf16 27B prefill at 8K with each (NINFER_PREFILL_GQA=repeat: the form before).
# Kernels: .kc_s12f (no kernel changed since call 8).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12f/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_attention.py tests/gpu/test_kv_quant_kernels.py tests/gpu/test_models.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -3
echo "== kv prefill"
timeout 150 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
echo "== bf16 27B prefill at 8K: enable_gqa, then repeated"
timeout 80 python bench/decode.py --shapes qwen3.5-27b --ctx 8192 --new 16 --prefill-repeats 3 2>&1 | grep RESULT
NINFER_PREFILL_GQA=repeat timeout 80 python bench/decode.py --shapes qwen3.5-27b --ctx 8192 --new 16 --prefill-repeats 3 2>&1 | grep RESULT
