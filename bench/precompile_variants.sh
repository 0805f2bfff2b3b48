#!/usr/bin/env bash
# Compile the sm90 backend's kernel library (BACKEND=sm75 etc.: that one's) for sm_90 with NVRTC 13.0 once per extra
# option set (a benchmark's variants, '/'-separated as bench/decode.py --opts and bench/gemv_stream.py --opts take
# them) into $1.
#     bash bench/precompile_variants.sh .kc "-DA=1/-DB=2 -DC=3"
set -e
NV=${NVRTC13:-/tmp/nv13}/nvidia/cu13/lib
export PYTHONPATH=$PWD/ninfer-core/src:$(ls -d $PWD/backends/*/src | tr '\n' ':')
export LD_LIBRARY_PATH=$NV LD_PRELOAD=$NV/libnvrtc.so.13
export NINFER_KERNEL_CACHE=$PWD/${1:-.kc}
VARIANTS="$2" BACKEND=${BACKEND:-sm90} python - <<'PY'
import copy
import importlib
import os

lib = importlib.import_module(f"ninfer_{os.environ['BACKEND']}").LIBRARY
for o in os.environ["VARIANTS"].split("/"):
    v = copy.copy(lib)
    v.options = lib.options + tuple(o.split())
    _, cached = v.compile("sm_90", progress=False)
    print(f"{os.environ['BACKEND']} '{o}'", "cached" if cached else "compiled", flush=True)
PY
