# Session 10, call 3: the cluster merge fix (attention tests), and the burst GEMV with its weights through a
# shared-memory ring (-DQMV_ASYNC=D): tests, GEMV-only and end-to-end A/B against the default. Precompiled here:
# bash bench/precompile_sm90.sh .kc_s10c && bash bench/precompile_quant_variants.sh .kc_s10q
#   "-DQMV_ASYNC=2;-DQMV_ASYNC=3;-DQMV_ASYNC=4;-DQMV_ASYNC=3 -DQMV_MAXREG=96"; carry [".kc_s10c", ".kc_s10q"].
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s10c/* .kc_s10q/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== tests"
timeout 120 python -m pytest -q -p no:cacheprovider tests/gpu/test_attention.py tests/gpu/test_quant_kernels.py -k "cluster or async_ring or burst" 2>&1 | grep -v "^ninfer: compiling" | tail -8
V="default (qmv1 for one token);qmv1 async ring 2;qmv1 async ring 3;qmv1 async ring 4;qmv1 async ring 3, 96 registers"
echo "== quant gemv"
timeout 120 python bench/quant.py --parts gemv --no-qgemv --widths 1,8 --layers 8 --variants "$V" 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||GPU|FAILED|Error|bandwidth"
echo "== quant e2e"
timeout 220 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "default (qmv1 for one token);qmv1 async ring 2;qmv1 async ring 3" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
