# Session 12, call 4: the prefill dequantisation kernels, tiles (qdeq_*) and row packing (qdeqr_*, sm_75 and GGUF
# mins): their tests, the quantised models' prefill at 8K with each and with the torch ops before them, the bf16
# Llama-3-8B prefill beside them (the peer). Kernels: .kc_s12c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== quant prefill"
timeout 330 python bench/quant.py --parts prefill --no-qgemv --lm-head int8 --prefill-ctx 8192 --prefill-packing tiles16,rows 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||FAILED|Error|matmul"
echo "== bf16 Llama-3-8B prefill (peer)"
timeout 100 python bench/decode.py --shapes llama3-8b --ctx 8192 --new 16 --prefill-repeats 3 2>&1 | grep -v "^ninfer: compiling\|ops of" | tail -2
