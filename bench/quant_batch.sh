#!/usr/bin/env bash
# One device call for issue 7 (run from the repo root on the GPU): the quant kernels' conformance tests, then
# bench/quant.py: GEMV-only (old vs new vs cuBLAS) and the per-shape sweep, then the end-to-end decode. The
# backend and the sweep's kernel variants compile in the background meanwhile.
source bench/device_env.sh
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O=${OUT:-/tmp}
python - > $O/kbuild.txt 2>&1 <<'PY' &
from ninfer.kernels.cli import build
from ninfer.quant import gpu
for u in (2, 8):
    gpu.compile_for("sm_90", extra=("-DQM_BENCH_ONLY", f"-DQM_U={u}"))
gpu.compile_for("sm_90", extra=("-DQM_PIPE",))
print(build("sm_90"))
PY
BUILD=$!
echo "== quant kernel tests"
timeout ${TEST_TIMEOUT:-150} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py 2>&1 | tail -15
echo "== bench/quant.py gemv, sweep"
timeout ${BENCH_TIMEOUT:-200} python bench/quant.py --parts gemv,sweep --tuned $O/tuned.json ${QUANT_ARGS:---layers 16} 2>&1 | tee $O/quant.txt | grep -v "^ninfer: compiling"
wait $BUILD; tail -1 $O/kbuild.txt | cut -c1-300
echo "== bench/quant.py e2e"
timeout ${E2E_TIMEOUT:-200} python bench/quant.py --parts e2e --tuned $O/tuned.json ${E2E_ARGS:-} 2>&1 | tee $O/quant_e2e.txt | grep -v "^ninfer: compiling\|ops of"
