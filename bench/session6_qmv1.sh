# Session 6 (bench/RESULTS.md): the one-token int4 kernel qmv1 on the H200: its tests, then GEMV-only and end to end
# A/B against qmma (the one-token kernel before it) and qmv1's burst variants, same process. Kernels precompiled here
# (`bash bench/precompile_sm90.sh .kc_s6a`, `bash bench/precompile_quant_variants.sh .kc_s6q "..."`).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s6a}/* ${KQ:-.kc_s6q}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
V=${V:-"default (qmv1 for one token);qmma for 1..8 tokens (before qmv1 / qmv8)"}
VE=${VE:-"default (qmv1 for one token);qmma for 1..8 tokens (before qmv1 / qmv8)"}
echo "== qmv1 tests"; timeout 120 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "burst" 2>&1 | tail -4
echo "== quant gemv"; timeout 90 python bench/quant.py --parts gemv --no-qgemv --widths ${W:-1,2,4,8} --layers 8 --variants "$V" 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/qgemv.txt | grep -E "^\||GPU|FAILED|Error"
echo "== quant e2e"; timeout 150 python bench/quant.py --parts e2e --no-qgemv --variants "$VE" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||FAILED|Error"
echo "== conformance"; timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12
