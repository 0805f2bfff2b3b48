#!/bin/bash
# One device call for the tensor-core GEMV (kernels/gemv.py): conformance of every backend's linear ops, the
# per-shape GEMV table against the CUDA-core kernels and cuBLAS, verify cost by width and decode tok/s with
# the GEMV modes of kernels/gemv.py (NINFER_GEMV=auto|mma|simt) in the same call. From the repository root:
#   bash bench/gemv_device.sh          (logs and JSON under $OUT)
set -u
source bench/device_env.sh
OUT=${OUT:-/tmp/gemv_out}; mkdir -p "$OUT"
t0=$(date +%s); stamp() { echo "=== $1 at +$(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
python -c "import torch, cuda.bindings.nvrtc as n; print('torch', torch.__version__, 'nvrtc', n.nvrtcVersion()[1:])"

stamp "compile (backends and bench variants, in parallel)"
for b in sm75 sm86 sm89 sm90; do
  (timeout 150 python -c "import ninfer_$b as m; m.LIBRARY.compile('sm_90', progress=False)" \
     > "/tmp/compile_$b.txt" 2>&1 || { echo "COMPILE FAILED $b"; tail -c 3000 "/tmp/compile_$b.txt"; }) &
done
(cd bench && timeout 150 python -c "import gemv_mma; gemv_mma.variant_library().compile('sm_90', progress=False)" \
   || echo "COMPILE FAILED variants") &
wait

stamp "conformance: tests/gpu/test_ops.py + test_fused.py -k linear"
timeout ${TEST_S:-90} python -m pytest -q -p no:cacheprovider tests/gpu/test_ops.py tests/gpu/test_fused.py -k linear -rf 2>&1 \
  | tee "$OUT/tests.txt" | grep -E "passed|failed|FAILED|Error" | tail -25

stamp "GEMV table"
timeout ${GEMV_S:-80} python bench/gemv_mma.py ${GEMV_ARGS:-} --json "$OUT/gemv.json" > "$OUT/gemv.txt" 2>&1
echo "gemv rc $?"; grep -E "copy bandwidth|T=1:|FAILED" "$OUT/gemv.txt" | cut -c1-150

stamp "verify cost, qwen3.5-27b 16 layers"
for mode in ${VERIFY_MODES:-simt auto mma}; do
  chk=--no-check; [ $mode = mma ] && chk=
  NINFER_GEMV=$mode timeout ${VERIFY_S:-45} python bench/verify_cost.py --layers 16 --shapes qwen3.5-27b \
    --widths 1,2,4,8,16 --ctx 1024 --reps 10 $chk --json "$OUT/verify_$mode.json" 2>&1 \
    | grep -vE "^\s*$" | tail -10 | cut -c1-200 | sed "s/^/[$mode] /"
done

stamp "decode A/B"
timeout ${DECODE_S:-90} python bench/decode.py --shapes llama3-8b,qwen3.5-27b --ctx 512 --gemv ${DECODE_MODES:-auto,mma,auto,mma} \
  --json "$OUT/decode.json" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | cut -c1-200
stamp "done"
