# Session 15, call 2: the one-token bf16 GEMVs' first round of weights loaded into registers before the PDL wait
# (-DNINFER_GEMV_PRE=1: gemv_rows, gemv_silu2) against the L2 prefetch there (the default), end to end on the
# Llama-3-8B and Qwen3.5-27B shapes, A, B, A, B in one process; the conformance suite on every backend first (the
# .cuh edit, and call 1's X16 test fixed). Kernels: .kc_s15b.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== X16 test"
timeout 100 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "beyond_fp16" --tb=short 2>&1 | grep -v "^ninfer: compiling" | tail -25
echo "== conformance"
timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== decode A/B"
timeout 330 python bench/decode.py --shapes llama3-8b,qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --opts "/-DNINFER_GEMV_PRE=1//-DNINFER_GEMV_PRE=1" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error"
