#!/usr/bin/env bash
# Compile, here (no GPU), every backend's kernel library and the quantised GEMV library for the H200 (sm_90) with
# NVRTC 13.0 (the device image's version) into the ignored folder $1 (default .kc), which a device call then
# carries and copies into its NINFER_KERNEL_CACHE (bench/*_batch.sh): nothing compiles on the device.
#     pip install --target /tmp/nv13 nvidia-cuda-nvrtc==13.0.88    # once
#     bash bench/precompile_sm90.sh .kc
# Any .cuh edit changes every cache key: compile again after one.
set -e
NV=${NVRTC13:-/tmp/nv13}/nvidia/cu13/lib
export PYTHONPATH=$PWD/ninfer-core/src:$PWD/drafters/src:$PWD/server/src:$(ls -d $PWD/backends/*/src | tr '\n' ':')
export LD_LIBRARY_PATH=$NV LD_PRELOAD=$NV/libnvrtc.so.13
export NINFER_KERNEL_CACHE=$PWD/${1:-.kc}
python - <<'PY'
import importlib

from ninfer.quant import gpu

gpu.compile_for("sm_90")
print("quant: ready (cached or compiled)", flush=True)
for b in ("sm90", "sm75", "sm86", "sm89"):  # sm75/86/89 run on the H200 through their sources compiled for sm_90
    m = importlib.import_module(f"ninfer_{b}")
    for c in [v for v in vars(m).values() if isinstance(v, type) and hasattr(v, "kernels")]:
        _, cached = c.kernels.compile("sm_90", progress=False)
        print(b, "cached" if cached else "compiled", flush=True)
PY
