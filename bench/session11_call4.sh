# Session 11, call 4: the split one-token burst kernel (qmv1k) for grids one wave cannot hold whole (the 27B's int4
# down projection): the quantised GEMV tests, decode A/B against unsplit, the 27B W4A16 kernel profile.
# Kernels: .kc_s11a (backends; no .cuh change since) + bash bench/precompile_quant_variants.sh .kc_s11b "".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11a/* .kc_s11b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== quant kernel tests"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== quant e2e"
timeout 300 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);qmv1 unsplit (before qmv1k);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
echo "== profile"
timeout 100 python bench/quant.py --parts profile --models "27B W4A16 g128" --profile-layers 8 2>&1 | grep -v "^ninfer: compiling\|ops of\|Warn\|warn" | tail -12
