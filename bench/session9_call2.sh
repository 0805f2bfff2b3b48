# Session 9, device call 2 (ran on commit 1cf5240; what it measured was reverted after it, bench/RESULTS.md): conformance
# of every backend with the lazy RMSNorm (decoder blocks whose norms ride in the GEMVs around them) and the decode attention's early reads, then their A/B on the decode step (bench/whatif.py:
# eager = the eager norms, late = attention reads after its wait). Kernels precompiled here (.kc_s9c).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s9c}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 110 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -25
echo "== llama3-8b"; timeout 60 python bench/whatif.py --shape llama3-8b --ctx 512 --variants base,eager,late,base 2>&1 | grep RESULT
echo "== qwen3-8b"; timeout 35 python bench/whatif.py --shape qwen3-8b --ctx 512 --variants base,eager+late 2>&1 | grep RESULT
echo "== qwen3.5-27b"; timeout 50 python bench/whatif.py --shape qwen3.5-27b --ctx 512 --new 64 --variants base,eager+late 2>&1 | grep RESULT
