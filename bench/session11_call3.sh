# Session 11, call 3: call 2's A/B after qmv_warps kept mma_warps' choice for grids of many waves (the 8B's int8
# lm_head had lost 7 % under call 2's rule); the quantised GEMV tests. Kernels: call 1's .kc_s11a (no .cu/.cuh change).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quant kernel tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== quant e2e"
timeout 300 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);qmv1 warps by mma_warps (before waves);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
