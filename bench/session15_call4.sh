# Session 15, call 4: the attention combine lets the next kernel (the o projection's GEMV) launch before it waits
# (NINFER_COMBINE_EARLY_TRIGGER 1, the default in this build) against after (=0, before), A, B, A, B in one process;
# then the conformance suite on every backend. Kernels: .kc_s15d.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== decode A/B"
F='s/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1//'
timeout 150 python bench/decode.py --shapes llama3-8b --ctx 512,8192 --new 128 --prefill-repeats 1 --opts "/-DNINFER_COMBINE_EARLY_TRIGGER=0//-DNINFER_COMBINE_EARLY_TRIGGER=0" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed "$F"
timeout 150 python bench/decode.py --shapes qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --opts "/-DNINFER_COMBINE_EARLY_TRIGGER=0//-DNINFER_COMBINE_EARLY_TRIGGER=0" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed "$F"
echo "== conformance"
timeout 220 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -3
