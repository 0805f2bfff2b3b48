# Session 12, call 3: the prefill dequantisation kernel (qdeq_*): its tests (bit for bit layout.dequantize), the
# quantised models' prefill at 8K with it and with the torch ops before it, the bf16 27B prefill beside them (the
# peer), and the quantised decode as a check that nothing else moved. Kernels: .kc_s12c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "prefill_dequantisation or matches_float32 or gguf" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== quant prefill"
timeout 300 python bench/quant.py --parts prefill --no-qgemv --lm-head int8 --prefill-ctx 8192 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||FAILED|Error|matmul"
echo "== bf16 27B prefill (peer)"
timeout 150 python bench/decode.py --shapes qwen3.5-27b --ctx 8192 --new 16 --prefill-repeats 3 2>&1 | grep -v "^ninfer: compiling\|ops of" | tail -4
