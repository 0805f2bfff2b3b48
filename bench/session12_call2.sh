# Session 12, call 2: the quantised burst GEMV with its tile's scales prefetched to L2 or in shared memory,
# against the default. GEMV only at 1 and 8 tokens, then end to end. Kernels: .kc_s12b (bench/precompile_sm90.sh + precompile_quant_variants.sh).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
D="default (qmv1 for one token)"; P2="qmv1 scales prefetched to L2"; P64="qmv1 scales in shared memory"
echo "== gemv"
timeout 240 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --variants "$D;$P2;$P64;$D" 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | head -60
echo "== e2e"
timeout 330 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$D;$P2;$P64;$D" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
