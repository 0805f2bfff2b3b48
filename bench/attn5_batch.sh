# Helper attn5's second device call (issue #5, decode attention at short/medium context in a 32K-token table; the
# first call ran this file as of commit b09462b): from the worktree root on the H200, kernels precompiled here
# (nothing compiles on the device):
#     bash bench/precompile_sm90.sh .kc            # every backend, the default options
#     PRECOMPILE=1 bash bench/attn5_batch.sh       # the sm90 library with each option set of ATTN5_VARIANTS
ATTN5_VARIANTS=("-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE")
if [ -n "$PRECOMPILE" ]; then  # here: the sm90 library once per variant, into .kc (NVRTC 13.0 as the device's)
    NV=${NVRTC13:-/tmp/nv13}/nvidia/cu13/lib
    export PYTHONPATH=$PWD/ninfer-core/src:$(ls -d $PWD/backends/*/src | tr '\n' ':')
    for o in "${ATTN5_VARIANTS[@]}"; do
        LD_LIBRARY_PATH=$NV LD_PRELOAD=$NV/libnvrtc.so.13 NINFER_KERNEL_CACHE=$PWD/.kc python - "$o" <<'PY'
import sys

from ninfer.backends import installed_backends

lib = installed_backends()["sm90"].kernels
lib.options = lib.options + tuple(sys.argv[1].split())
print(sys.argv[1], "cached" if lib.compile("sm_90", progress=False)[1] else "compiled", flush=True)
PY
    done
    exit 0
fi
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OLD="-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE"
echo "== micro"; timeout 90 python bench/attn_decode.py --ctx 512,4096,16384 --tokens 1,4 --capacity 32768 \
    --variants "old:$OLD:32:0:8;new:;new_s0::32:0;new_r4::32:64:4;new_m64::64:0" \
    --json $OUT/micro.json 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/micro.txt
echo "== decode"; timeout 110 python bench/decode.py --shapes llama3-8b,qwen3.5-27b --ctx 512,4096 --new 256 \
    --capacity 32768 --prefill-repeats 1 --opts "/$OLD" --json $OUT/decode.json 2>&1 \
    | grep -E "RESULT|FAILED|Error|copy bandwidth" | sed 's/ gemv=auto pdl=1     norm=1 fused=1//; s/ prefill .*//' | tee $OUT/decode.txt
echo "== conformance"; timeout 70 python -m pytest -q -p no:cacheprovider tests/gpu/test_attention.py \
    tests/gpu/test_fused.py tests/gpu/test_kv_quant_kernels.py::test_paged_attention > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12
echo "== profile"; for o in "" "$OLD"; do NINFER_PDL=0 timeout 25 python bench/decode_profile.py --shape llama3-8b \
    --layers 8 --capacity 32768 --opts="$o" 2>&1 | grep -E "layers, ctx|attention|kernel " ; done | tee $OUT/profile.txt
