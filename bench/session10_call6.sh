# Session 10, call 6: SwiGLU in the one-token quantised gate_up GEMV (qmv1s): conformance of main, the new tests,
# quantised decode A/B against the two launches. Precompiled here: the backends' cubins of .kc_s10e (unchanged) and
# bash bench/precompile_quant_variants.sh .kc_s10f ""; carry [".kc_s10f"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s10f/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -6
echo "== quant e2e"
timeout 220 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);gate_up GEMV then silu_mul (before qmv1s);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
