# Session 7, device call 4: the two-rows-a-warp GEMV capped at 64 registers (kernels.cuh: NINFER_GEMV_PAIRS entry
# points; call 3 saw 66-70 registers and the Llama shapes slower) — conformance, per op, end to end A/B.
# Kernels precompiled here with NVRTC 13.0 (bench/precompile_sm90.sh .kc_s7c; the lab in .kc_s7lab).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s7c/* .kc_s7lab/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 200 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -15
echo "== per op (backend column: pairs on)"; timeout 60 python bench/gemv_lab.py --gap --variants r1_u4_s4_w4_st0_pre0_m0,r2_u2_s2_w4_st0_pre0_m2,r2_u2_s1_w4_st0_pre0_m2 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab.txt | tail -6
echo "== decode A/B"; timeout 200 python bench/decode.py --shapes llama3-8b,qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 --capacity 32768 --pairs 1,0,1,0 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee $OUT/decode.txt
