#!/usr/bin/env bash
# One device call for issue #5 (fast prefill of the 27B hybrid shape), from the repo root on the H200: the
# conformance suite of the Gated DeltaNet prefill kernels (sm90 and the fp16-only sm75; sm86/sm89 build the
# same GDN source with the same macros) and of prefill attention, the per-op table, bench/decode.py at 8K,
# and the prefill variants with a profile. A kernel cache in .kc (compiled here by NVRTC of the device's
# version) is used when present.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE; [ -d .kc ] && cp -r .kc/. $NINFER_KERNEL_CACHE/
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s); el() { echo "== [+$(( $(date +%s) - T0 )) s] $*"; }
el "kernels (sm90, sm75 for this GPU)"
timeout 120 python - <<'PY'
import importlib, time
from concurrent.futures import ProcessPoolExecutor
def build(b):
    t = time.time(); _, cached = importlib.import_module(f"ninfer_{b}").LIBRARY.compile("sm_90", progress=False)
    return b, cached, round(time.time() - t, 1)
with ProcessPoolExecutor(2) as ex: print(list(ex.map(build, ["sm90", "sm75"])))
PY
el "conformance: GDN kernels"
timeout 150 python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k "sm90 or sm75" 2>&1 | tail -12
el "conformance: prefill attention, 27B end to end"
timeout 90 python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_attention.py tests/gpu/test_models.py \
  -k "sm90 and (40-1000 or 300-300 or 27b)" 2>&1 | tail -8
el "per-op table"
timeout 100 python bench/gdn_kernels.py --backend sm90 2>&1 | tee $OUT/gdn_kernels.txt
el "bench/decode.py 27B at 8K"
timeout 100 python bench/decode.py --backend sm90 --shapes qwen3.5-27b --ctx 8192 --new 16 --json $OUT/decode.json 2>&1 | grep -v "ops of"
el "prefill variants and profile"
timeout ${PROFILE_TIMEOUT:-150} python bench/prefill_profile.py ${PROFILE_ARGS:-} 2>&1 | tee $OUT/profile.txt
el done
