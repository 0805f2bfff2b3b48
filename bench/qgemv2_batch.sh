#!/usr/bin/env bash
# One device call for issue 7, session 4 (helper qgemv2): the split form of the tensor-core GEMV (qmsk) against
# the per-tile form (qmma, the previous default). The bench-variant tests are left out (their builds are not in .kc). Run from the worktree root on the GPU with the kernels precompiled
# here with NVRTC 13.0 into the ignored .kc (nothing compiled on the device). Steps (default all): test (the quant
# kernels' conformance), gemv (GEMV-only A/B, 8 layers, 1/8/16 tokens), e2e (decode end to end, both shapes;
# LM_HEAD=none,int8 runs it again with lm_head quantised as LLM(quantize_lm_head="int8") serves it).
# Logs under $OUT.
source bench/device_env.sh
if [ -d .kc ]; then mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
O=${OUT:-/tmp}
STEPS="${*:-test gemv e2e}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
GV=${GEMV_VARIANTS:-"qmma per tile (previous default);default (per tile 1..8 tokens, split 9..16);qmsk split;qmsk split, int8 U=2;default, split with int8 U=2"}
EV=${E2E_VARIANTS:-"qmma per tile (previous default);default (per tile 1..8 tokens, split 9..16);qmsk split"}
if has test; then echo "== quant kernel tests"; timeout ${TEST_TIMEOUT:-150} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | tee $O/test.txt | tail -8; fi
if has gemv; then echo "== gemv A/B"; timeout ${GEMV_TIMEOUT:-120} python bench/quant.py --parts gemv --no-qgemv --widths ${WIDTHS:-1,8,16} --layers 8 --variants "$GV" 2>&1 | tee $O/gemv.txt | grep -v "^ninfer: compiling"; fi
if has e2e; then echo "== e2e"; timeout ${E2E_TIMEOUT:-230} python bench/quant.py --parts e2e --no-qgemv --variants "$EV" --lm-head ${LM_HEAD:-none} 2>&1 | tee $O/e2e.txt | grep -v "^ninfer: compiling\|ops of"; fi
