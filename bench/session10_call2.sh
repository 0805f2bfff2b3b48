# Session 10, call 2: the one-launch cluster decode attention (attention.cuh: attention_cluster) and the sm90 backend's
# early attention reads made default. Precompiled here: bash bench/precompile_sm90.sh .kc_s10 &&
# bash bench/precompile_variants.sh .kc_s10 "-DNINFER_PDL_EARLY_LOADS=0"; carry [".kc_s10"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp ${KC:-.kc_s10}/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
git log --oneline -1
echo "== conformance (default build: sm90 with early reads)"
timeout 170 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -15
echo "== models with the cluster attention"
NINFER_ATTN_CLUSTER=cluster16w4 timeout 60 python -m pytest -q -p no:cacheprovider tests/gpu/test_models.py -k "sm90" 2>&1 | tail -3
echo "== per call"
timeout 80 python bench/attn_decode.py --shapes 8b --ctx 512,2048,8192,32000 --tokens 1 --capacity 32768 \
  --variants "split:;cluster16w4:;cluster8w8:;cluster16w8:" 2>&1 | grep -v "^ninfer: compiling"
echo "== A/B on the decode step"
timeout 110 python bench/whatif.py --shape llama3-8b --ctx 512 --variants base,late,cluster16w4,cluster8w8,cluster16w8,base 2>&1 | grep RESULT
timeout 70 python bench/whatif.py --shape llama3-8b --ctx 8192 --variants base,cluster16w4,cluster16w8 2>&1 | grep RESULT
timeout 70 python bench/whatif.py --shape qwen3-8b --ctx 512 --variants base,cluster16w4,cluster16w8 2>&1 | grep RESULT
