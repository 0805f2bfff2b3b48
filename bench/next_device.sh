# The next device call (written in session 9, not run yet): the two opt-in changes of session 9 in one call.
# Precompile here first (~5 min):
#   bash bench/precompile_sm90.sh .kc_next && bash bench/precompile_variants.sh .kc_next "-DNINFER_PDL_EARLY_LOADS=1"
# 1. the conformance suite (default build; it forces the norm-in kernels on in its own tests, and runs the early-loads
#    build of sm90 in tests/gpu/test_attention.py::test_attention_right_after_the_kv_write_early_loads);
# 2. the A/B on the decode step (bench/whatif.py: normin = NINFER_NORM_IN=auto, early = -DNINFER_PDL_EARLY_LOADS=1);
# 3. the decode benchmark with the winner on, and transformers beside it.
# If the conformance run shows a failure of either change, leave it off (opt-in) and say why in bench/RESULTS.md.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_next}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -25
echo "== A/B"; for s in llama3-8b qwen3-8b; do timeout 90 python bench/whatif.py --shape $s --ctx 512 --variants base,normin,early,normin+early,base,normin+early 2>&1 | grep RESULT; done
echo "== decode"; NINFER_NORM_IN=auto timeout 150 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 2>&1 | grep -E "RESULT|FAILED|copy bandwidth"
echo "== transformers"; timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | tail -4
