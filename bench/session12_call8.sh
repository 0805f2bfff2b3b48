# Session 12, call 8: the conformance suite on main as it stands (int4 one-token bursts from a stepped pointer, the
# prefill dequantisation kernels), then one more int4 one-token variant against it: raw codes into the MMA with the
# offset off by a second MMA (QMV_RAW=1: 16 HMMA a burst instead of 64 HFMA2; 8-24 bytes of spill). Kernels: .kc_s12e.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s12e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" 2>&1 | grep -v "^ninfer: compiling" | grep -E "passed|failed|FAILED|Error" | head -20
D="default (qmv1 for one token)"; R="qmv1 int4 raw codes, offset by a second mma (QMV_RAW=1)"
echo "== gemv"
timeout 120 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1 --models "27B W4A16 g128" --variants "$D;$R;$D;$R" 2>&1 | grep -v "^ninfer: compiling" | grep -E "^\||bandwidth|FAILED|Error" | head -20
echo "== e2e"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "27B W4A16 g128" --variants "$D;$R;$D" 2>&1 | grep -v "^ninfer: compiling\|ops of" | grep -E "^\||host gap|FAILED|Error|bandwidth"
