#!/usr/bin/env bash
# Compile, here (no GPU), the quantised GEMV library for sm_90 with NVRTC 13.0 (the device image's) for each ';'-separated
# set of extra -D options in $2 (as bench/quant.py's VARIANTS pass them; "" = the default build) into the folder $1.
#     bash bench/precompile_quant_variants.sh .kc_q ";-DQMV_BURST=8;-DQMV_BURST=2 -DQMV_PIPE=1"
set -e
NV=${NVRTC13:-/tmp/nv13}/nvidia/cu13/lib
export PYTHONPATH=$PWD/ninfer-core/src
export LD_LIBRARY_PATH=$NV LD_PRELOAD=$NV/libnvrtc.so.13
export NINFER_KERNEL_CACHE=$PWD/${1:-.kc}
python - "$2" <<'PY'
import sys

from ninfer.quant import gpu

for opts in sys.argv[1].split(";"):
    gpu.compile_for("sm_90", extra=tuple(opts.split()))
    print("quant", repr(opts), "ready", flush=True)
PY
