# Ran on commit 94cc1dc (the bulk form and the uncapped pairs entry points, both reverted after this call: bench/RESULTS.md 2026-12-03 session 8).
# Session 8, device call 1: the quantised GEMV's bulk form (qmvb1 / qmvb8: bursts by cp.async.bulk into a ring in
# shared memory, kernels/qgemv.cu) — its tests, GEMV only and end to end against the burst form (qmv1 / qmv8), same
# process. Kernels precompiled here with NVRTC 13.0 (bench/precompile_sm90.sh .kc_s8a;
# bench/precompile_quant_variants.sh .kc_s8q "-DQMVB_STAGES=2;-DQMVB_STAGES=3;-DQMVB_STAGES=8;-DQMVB_MAXREG=80").
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s8a}/* ${KQ:-.kc_s8q}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== bulk tests"; timeout 150 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "bulk" > $OUT/bulk_tests.txt 2>&1; echo rc $?; tail -5 $OUT/bulk_tests.txt
V=${V:-"default (qmv1 for one token);qmvb (bulk copies, 4 slots a warp);qmvb, 2 slots a warp;qmvb, 3 slots a warp;qmvb, 8 slots a warp;qmvb, 80 registers;qmvb, 16 warps a tile;qmvb, 8 warps a tile"}
VE=${VE:-"default (qmv1 for one token);qmvb (bulk copies, 4 slots a warp);qmvb, 2 slots a warp"}
echo "== quant gemv"; timeout 150 python bench/quant.py --parts gemv --no-qgemv --widths ${W:-1,8} --layers 8 --variants "$V" 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/qgemv.txt | grep -E "^\||GPU|FAILED|Error"
echo "== quant e2e"; timeout 220 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$VE" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||FAILED|Error"
echo "== pairs tests"; timeout 90 python -m pytest -q -p no:cacheprovider tests/gpu/test_ops.py tests/gpu/test_gdn_kernels.py -k "pairs or gdn_in_proj" > $OUT/pairs_tests.txt 2>&1; echo rc $?; tail -3 $OUT/pairs_tests.txt
echo "== decode A/B: 27B, pairs with the register budget by shape (pairs_cap) / all capped"; timeout 200 python bench/decode.py --shapes qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --capacity 32768 --pairs "1::,1::0,1::,1::0" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee $OUT/decode.txt
