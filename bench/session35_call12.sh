# Session 35, call 12: the GPU conformance suite (every backend that runs on sm_90) at the session's kernels (the
# small ops' weights before their PDL wait, the recurrence's z staged with q, k, v), in collection order; the ids it
# reached are written to $OUT so a later call can run the rest. Run it at the commit that adds it (main).
# Kernels: bash bench/precompile_sm90.sh .kc_s35e; bash bench/precompile_quant_variants.sh .kc_s35e "", carried.
source bench/device_env.sh; mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name --format=csv,noheader
python -m pytest --co -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>/dev/null | grep "::" > $OUT/ids.txt
wc -l < $OUT/ids.txt
timeout 500 python -m pytest -q -p no:cacheprovider -rfE tests/gpu -k "not bench_variants" > $OUT/suite.txt 2>&1; echo "rc $?"
grep -cE "PASSED|passed" $OUT/suite.txt >/dev/null; tail -4 $OUT/suite.txt | cut -c1-300
grep -E "^(FAILED|ERROR)" $OUT/suite.txt | head -20 | cut -c1-250
