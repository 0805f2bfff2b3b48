# For a device call (next session): the decode attention's reads before its wait (-DNINFER_PDL_EARLY_LOADS=1, opt-in). The graph test that
# would catch a read of this step's keys before their write, the conformance suite, then the A/B (early = the reads
# before the wait). Precompile here first: bash bench/precompile_sm90.sh .kc_early &&
#   bash bench/precompile_variants.sh .kc_early "-DNINFER_PDL_EARLY_LOADS=1"
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_early}/* $NINFER_KERNEL_CACHE/
echo "== graph test (default build, then early)"; timeout 60 python -m pytest -q -p no:cacheprovider tests/gpu/test_attention.py -k "after_the_kv_write" 2>&1 | tail -5
echo "== conformance"; timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== A/B"; for s in llama3-8b qwen3-8b; do timeout 60 python bench/whatif.py --shape $s --ctx 512 --variants base,early,base,early 2>&1 | grep RESULT; done
