# Session 6, call 7 (bench/RESULTS.md): the burst kernel's 16-token form and int4 register caps (GEMV only), end to end
# with an int8 lm_head, the quantised-GEMV tests. Kernels precompiled here (.kc_s6a backends, .kc_s6q quant variants).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s6a}/* ${KQ:-.kc_s6q}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== burst tests"; timeout 120 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "burst" 2>&1 | tail -3
echo "== quant gemv"; timeout 100 python bench/quant.py --parts gemv --no-qgemv --widths 1,8,16 --layers 8 --variants "default (qmv1 for one token);qmv16 for 9..16 tokens;int4 64 registers;int4 72 registers" 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/qgemv.txt | grep -E "^\||GPU|FAILED|Error"
echo "== quant e2e, lm_head int8"; timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token)" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||FAILED|Error"
echo "== quant kernels, attention"; timeout 180 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py tests/gpu/test_attention.py -k "not bench_variants" 2>&1 | tail -3
