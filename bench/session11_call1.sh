# Session 11, call 1: a Gated DeltaNet layer's quantised input projection with the conv update and the gates in one
# launch (qmv1g): conformance of every backend (the GdnInEpilogue moved to its own header), the new tests, the
# quantised 27B decode A/B against the ops one by one, and a kernel profile of the 27B W4A16 step.
# Precompiled here: bash bench/precompile_sm90.sh .kc_s11a; carry [".kc_s11a"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== new tests"
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "gdn_in or qmv1g" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== conformance"
timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -6
echo "== quant e2e"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "27B W4A16 g128" --variants "default (qmv1 for one token);GDN projection, conv, gates one by one (before qmv1g);default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
echo "== profile"
timeout 100 python bench/quant.py --parts profile --models "27B W4A16 g128" --profile-layers 8 2>&1 | grep -v "^ninfer: compiling\|ops of" | tail -20
