# Session 7, device call 1 (bench/RESULTS.md): the one-token bf16 GEMV structures of bench/gemv_lab.cu on the
# decode shapes; NINFER_GEMV_NEXT (gemv.cuh: the next round of loads in flight) end to end, A/B in one process;
# where a 27B decode step's kernel time goes. Kernels precompiled here with NVRTC 13.0: backends in .kc_s7a
# (bench/precompile_sm90.sh), the NEXT variant in .kc_s7n (bench/precompile_variants.sh), the lab in .kc_s7lab.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s7a/* .kc_s7n/* .kc_s7lab/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== NEXT bitwise"; timeout 60 python - <<'PY'
import copy, torch
import ninfer_sm90
from ninfer.kernels.ops import make_ops
base = ninfer_sm90.LIBRARY
nxt = copy.copy(base); nxt.options = base.options + ("-DNINFER_GEMV_NEXT=1",); nxt._modules = {}
a, b = make_ops(base), make_ops(nxt)
bad = 0
for N, K in [(16480, 5120), (5120, 6144), (5120, 17408), (4096, 4096), (6144, 4096), (4096, 14336), (1000, 520), (96, 1032)]:
    W = torch.randn(N, K, device="cuda", dtype=torch.bfloat16); x = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
    ya, yb = a["linear"](x, W), b["linear"](x, W)
    ok = torch.equal(ya, yb); bad += not ok
    print(N, K, "bitwise equal" if ok else f"DIFFER max {(ya.float()-yb.float()).abs().max().item()}")
print("NEXT bitwise:", "PASS" if bad == 0 else "FAIL")
PY
echo "== gemv lab"; timeout 200 python bench/gemv_lab.py 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/lab.txt
echo "== decode A/B"; timeout 200 python bench/decode.py --shapes qwen3.5-27b,llama3-8b --ctx 512 --new 128 --prefill-repeats 1 --opts "/-DNINFER_GEMV_NEXT=1//-DNINFER_GEMV_NEXT=1" 2>&1 | grep -E "RESULT|FAILED|copy bandwidth|Error" | tee $OUT/decode.txt
echo "== profile 27b"; NINFER_PDL=0 timeout 90 python bench/decode_profile.py --shape qwen3.5-27b --layers 8 --steps 5 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/prof27.txt | head -30
