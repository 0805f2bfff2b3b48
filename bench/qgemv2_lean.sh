#!/usr/bin/env bash
# Session 4's second device call for issue 7 (helper qgemv2), kept short for the session's device budget: GEMV-only
# A/B at 1 token of the L2 prefetch distance (per-tile qmma, 0 / 8 / 16 chunks ahead), then decode end to end
# with the previous default and the prefetch distance that was fastest on the 27B shape, then the quant kernels'
# conformance tests (bench-variant builds and the unchanged CUDA-core kernel's tests left out). Logs under $OUT.
source bench/device_env.sh
if [ -d .kc ]; then mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/; fi
O=${OUT:-/tmp}
echo "== gemv A/B"
timeout ${GEMV_TIMEOUT:-40} python bench/quant.py --parts gemv --no-qgemv --widths 1 --layers 8 --variants "qmma per tile (previous default);qmma per tile, L2 prefetch 8;qmma per tile, L2 prefetch 16" 2>&1 | tee $O/gemv.txt | grep "^|"
BEST=$(python -c '
import sys
rows = [l.split("|") for l in open(sys.argv[1]) if l.startswith("| 27B") and "prefetch" in l]
print(max(rows, key=lambda r: float(r[7]))[2].strip() if rows else "qmma per tile, L2 prefetch 8")' $O/gemv.txt)
echo "== e2e (previous default vs $BEST)"
timeout ${E2E_TIMEOUT:-70} python bench/quant.py --parts e2e --no-qgemv --variants "qmma per tile (previous default);$BEST" 2>&1 | tee $O/e2e.txt | grep "^|"
echo "== quant kernel tests"
timeout ${TEST_TIMEOUT:-55} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants and not qgemv_matches" 2>&1 | tee $O/test.txt | tail -5
