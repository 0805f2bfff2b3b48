# Session 11, call 5: main at the end of the session (qmv1s / qmv1g launch code shared in gpu._one_token_form):
# conformance of every backend, then the quantised decode A/B of calls 2-3 once more.
# Kernels: .kc_s11a (bash bench/precompile_sm90.sh .kc_s11a; no .cu/.cuh change since call 1).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 220 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -6
echo "== quant e2e"
timeout 300 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);qmv1 warps by mma_warps (before waves);GDN projection, conv, gates one by one (before qmv1g);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
