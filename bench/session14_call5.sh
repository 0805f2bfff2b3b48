# Session 14, call 5: main as it stands (kvq_prefill's Turing form as in call 2): the GPU conformance suite on every
# backend; the quantised GEMVs alone with bf16 and fp16 activations (cuBLAS in the same dtype beside them).
# Kernels: .kc_s14e.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s14e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | tail -4
for dt in bf16 fp16 bf16 fp16; do
  echo "== gemv $dt"
  timeout 150 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --act-dtype $dt 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | grep -v "previous default" | head -20
done
