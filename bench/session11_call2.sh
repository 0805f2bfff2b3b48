# Session 11, call 2 (call 3 the same after the rule kept mma_warps for grids of many waves): warps a tile for the burst kernels by waves of resident blocks (qmv_warps): the quantised GEMV
# tests, the 27B W4A16 decode A/B against mma_warps' rule and against the GDN ops one by one, 8B W8A16 decode.
# The kernels are call 1's (bash bench/precompile_sm90.sh .kc_s11a; no .cu/.cuh change since); carry [".kc_s11a"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quant kernel tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -8
echo "== quant e2e"
timeout 300 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);qmv1 warps by mma_warps (before waves);GDN projection, conv, gates one by one (before qmv1g);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
