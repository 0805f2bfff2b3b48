# Session 15, call 1: int8 codes with bf16 activations multiplied in fp16 (qgemv.cu: X16, the default now) against
# the bf16 products (-DQMV_X16=0): the GPU conformance suite on every backend, then the quantised GEMVs alone and
# the 8B W8A16 / 27B W4A16 models end to end, A, B, A, B in one process. Kernels: .kc_s15a.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
git log -1 --format=%h 2>/dev/null
echo "== conformance"
timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
D="default (per tile 1..8 tokens, split 9..16)"; O="int8 with bf16 activations multiplied in bf16 (before X16)"
echo "== gemv"
timeout 150 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --models "8B W8A16 g128" --variants "$D;$O;$D;$O" 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | head -24
echo "== e2e"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$D;$O;$D;$O" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\| (8B|27B)|host gap|FAILED|Error|bandwidth"
