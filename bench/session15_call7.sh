# Session 15, call 7: the residual add + RMSNorm letting the next kernel launch before it waits
# (-DNINFER_NORM_EARLY_TRIGGER=1, opt-in) against main, A, B, A, B in one process on Llama-3-8B and Qwen3.5-27B; then
# the quantised models end to end with main's defaults (X16, GEMV_PRE, the combine's early trigger). Kernels: .kc_s15e
# (sm90 only).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15e/* $NINFER_KERNEL_CACHE/
echo "== decode A/B"
F='s/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1//'
timeout 120 python bench/decode.py --shapes llama3-8b,qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --opts "/-DNINFER_NORM_EARLY_TRIGGER=1//-DNINFER_NORM_EARLY_TRIGGER=1" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | sed "$F"
echo "== quantised e2e"
timeout 110 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (per tile 1..8 tokens, split 9..16)" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth"
