# Session 12, call 7: call 6 again with the stepped pointer for one token only (the 8- and 16-token forms as before,
# which it made slower) and the variant taking the one-launch SwiGLU and GDN forms from its own build (a fair e2e A/B),
# GEMV only and end to end; the quantised kernel tests. Kernels: .kc_s12e.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quant kernel tests"
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -3
D="default (qmv1 for one token)"; A="qmv1 addresses as before (QMV_ADDR=0)"
echo "== gemv"
timeout 200 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --variants "$D;$A;$D;$A" 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | head -40
echo "== e2e"
timeout 300 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$D;$A;$D;$A" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
