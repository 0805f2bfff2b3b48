#!/usr/bin/env bash
# One device call for issue #5, session 4 (the chunked Gated DeltaNet prefill's state pass on tensor cores), from
# the repo root on the H200: a quick conformance check of the new pass (sm90); bench/decode.py at 8K (prefill: median
# of repeats, beside the bf16 matmul rate of the same process); the prefill A/B in one process (new default, the
# CUDA-core state pass, prefill pieces of 4096) with a profile; the previous code (commit 5f29f50, exported to the
# untracked .base/ beside the sources) timed the same way in this call; then the chunked GDN conformance tests on
# every backend that runs here and the 27B end-to-end tests. Kernels precompiled in .kc (old and new sources).
# .base was made here with: mkdir .base && git archive 5f29f50 ninfer-core backends drafters bench | tar -x -C .base
# (then its sm90 library precompiled into .kc like the others); without .base the step is skipped.
# STEPS (default: all): quick decode ab base conf models
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE; [ -d .kc ] && cp -r .kc/. $NINFER_KERNEL_CACHE/
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s); el() { echo "== [+$(( $(date +%s) - T0 )) s] $*"; }
STEPS="${STEPS:-quick decode ab base conf models}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has quick; then el "quick conformance: chunked GDN, sm90"
  timeout 90 python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k "sm90 and chunked" 2>&1 | tail -6; fi
if has decode; then el "bench/decode.py 27B at 8K (prefill: median of ${REPEATS:-5})"
  timeout 120 python bench/decode.py --backend sm90 --shapes qwen3.5-27b --ctx 8192 --new 16 \
    --prefill-repeats ${REPEATS:-5} --json $OUT/decode.json 2>&1 | grep -v "ops of" | tee $OUT/decode.txt; fi
if has ab; then el "prefill A/B and profile"
  timeout ${AB_S:-120} python bench/prefill_profile.py --repeats ${AB_REPEATS:-3} \
    --variants ${AB_VARIANTS:-default,gdn_simt,default+piece=4096} --top 14 2>&1 | tee $OUT/ab.txt; fi
if has base && [ -d .base ]; then el "previous code (5f29f50 in .base): prefill, median of ${REPEATS:-5}"
  (cd .base && source ../bench/device_env.sh && export NINFER_KERNEL_CACHE=/tmp/kc && timeout 90 python \
    ../bench/prefill_profile.py --variants default --repeats ${REPEATS:-5} --no-profile 2>&1 | tee $OUT/base.txt); fi
if has conf; then el "conformance: chunked GDN kernels, every backend"
  timeout ${CONF_S:-150} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k chunked > $OUT/conf.txt 2>&1
  echo "rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/conf.txt | tail -10; fi
if has models; then el "conformance: 27B end to end, every backend"
  timeout ${MODELS_S:-100} python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_models.py -k 27b > $OUT/models.txt 2>&1
  echo "rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/models.txt | tail -8; fi
el done
