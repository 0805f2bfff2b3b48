# Ran at commit ea28a2d (the L2-prefetch form of Turing's kvq_prefill; removed after this call: slower on the H200, bench/RESULTS.md session 14).
# Session 14, call 4: main with kvq_prefill's Turing form asking L2 for the next tile before the products and copying it
# after them (the sm75 backend's build; -DNINFER_KVQP_L2_PREFETCH=0: copied before the products, as in call 2): the GPU
# conformance suite on every backend, then bench/kv_prefill.py on sm75 (fp16) with both Turing forms and on sm90.
# Kernels: .kc_s14d (main's, and the sm75 variant).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14d/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
echo "== kv prefill bench: sm75 fp16, Turing's form (L2 prefetch / none), then sm90"
timeout 150 python bench/kv_prefill.py --backend sm75 --dtype fp16 --opts "/-DNINFER_KVQP_L2_PREFETCH=0" 2>&1 | grep -v "^ninfer: compiling"
timeout 100 python bench/kv_prefill.py --backend sm90 2>&1 | grep -v "^ninfer: compiling"
