# For a device call (next session; NINFER_NORM_IN is opt-in until this has run): conformance of every backend with the RMSNorms inside the decode
# GEMVs (DecoderBlock.norm_in), then its A/B on the decode step and the decode benchmark with transformers beside it.
# Kernels precompiled here first: bash bench/precompile_sm90.sh .kc_normin
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_normin}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -25
echo "== A/B"; for s in llama3-8b qwen3-8b; do timeout 60 python bench/whatif.py --shape $s --ctx 512 --variants base,normin,base,normin 2>&1 | grep RESULT; done
echo "== decode"; NINFER_NORM_IN=auto timeout 150 python bench/decode.py --shapes llama3-8b,qwen3-8b,qwen3.5-27b --ctx 512,8192 --new 128 --prefill-repeats 3 2>&1 | grep -E "RESULT|FAILED|copy bandwidth"
echo "== transformers"; timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | tail -4
