#!/usr/bin/env bash
# One device call for issue 7 (run from the worktree root on the GPU, kernels precompiled into .kc with NVRTC 13.0,
# see bench/RESULTS.md): the quant kernels' conformance tests (default build, then the QM_SMEM_RING and QM_RAW builds), then bench/quant.py: GEMV-only A/B (CUDA-core qgemv,
# previous qmma, new qmma with its ring in registers / shared memory, with QM_RAW, bf16 cuBLAS), the end-to-end decode,
# the per-shape sweep and a kernel profile of the quantised decode step. Logs under $OUT.
source bench/device_env.sh
if [ -d .kc ]; then mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
O=${OUT:-/tmp}
STEPS="${*:-test testvar gemv sweep e2e profile}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has test; then echo "== quant kernel tests"; timeout ${TEST_TIMEOUT:-100} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py 2>&1 | tee $O/test.txt | tail -12; fi
if has testvar; then for v in -DQM_SMEM_RING -DQM_RAW; do echo "== quant kernel tests, NINFER_QMMA_EXTRA=$v"; NINFER_QMMA_EXTRA=$v timeout ${TEST_TIMEOUT:-100} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | tail -3; done; fi
if has gemv; then echo "== gemv A/B"; timeout ${GEMV_TIMEOUT:-60} python bench/quant.py --parts gemv --widths ${WIDTHS:-1,16} --layers 8 2>&1 | tee $O/gemv.txt | grep -v "^ninfer: compiling"; fi
if has sweep; then echo "== sweep"; timeout ${SWEEP_TIMEOUT:-40} python bench/quant.py --parts sweep --tuned $O/tuned.json 2>&1 | tee $O/sweep.txt | grep -v "^ninfer: compiling"; fi
if has e2e; then echo "== e2e"; timeout ${E2E_TIMEOUT:-110} python bench/quant.py --parts e2e --tuned $O/tuned.json 2>&1 | tee $O/e2e.txt | grep -v "^ninfer: compiling\|ops of"; fi
if has profile; then echo "== profile"; timeout ${PROFILE_TIMEOUT:-45} python bench/quant.py --parts profile --profile-layers 8 2>&1 | tee $O/profile.txt | grep -v "^ninfer: compiling\|ops of"; fi
