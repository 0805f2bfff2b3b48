# Session 11, call 6: the Gated DeltaNet recurrence asks L2 for its state before its PDL wait (NINFER_GDN_STATE_L2):
# the Gated DeltaNet tests on every backend, the 27B bf16 decode A/B against -DNINFER_GDN_STATE_L2=0 (whatif gdnlate). Precompiled here: bash bench/precompile_sm90.sh .kc_s11c &&
# bash bench/precompile_variants.sh .kc_s11c "-DNINFER_GDN_STATE_L2=0"; carry [".kc_s11c"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s11c/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== A/B"
timeout 200 python bench/whatif.py --shape qwen3.5-27b --ctx 512 --new 128 --variants base,gdnlate,base,gdnlate 2>&1 | grep -E "RESULT|copy bandwidth"
