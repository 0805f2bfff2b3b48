# Session 15, call 5: call 4's conformance again (its run stopped at its time limit while the PRE test's two sm90
# variants compiled on the device; they are precompiled in .kc_s15d now). Main with NINFER_COMBINE_EARLY_TRIGGER 1.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s15d/* $NINFER_KERNEL_CACHE/
echo "== conformance"
timeout -s INT 330 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -8
