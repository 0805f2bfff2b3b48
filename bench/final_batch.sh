#!/usr/bin/env bash
# One device call for the figures issues 3, 6 and 7 ask for (run from the repo root on the H200).
# Steps to run as arguments (default: quant hybrid verify qbench); also gpu (the conformance suite),
# decode (bench/decode.py at 512 context, DECODE_ARGS to change), peer (transformers on the 8B and 27B shapes),
# kv (quantised vs bf16 KV attention), qe2e (quantised-weight decode end to end, bench/quant.py).
source bench/device_env.sh
# kernels compiled ahead here with the device's NVRTC (13.0), carried in the ignored ${KC:-.kc_dev}: no compile there
KC=${KC:-.kc_dev}; if [ -d $KC ]; then mkdir -p $NINFER_KERNEL_CACHE && cp $KC/* $NINFER_KERNEL_CACHE/; fi
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
STEPS="${*:-quant hybrid verify qbench}"
has() { [[ " $STEPS " == *" $1 "* ]]; }
if has conf; then echo "== conformance subset (gates, GDN kernels incl. in-place, end-to-end models)"; timeout 200 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_gdn_gates.py tests/gpu/test_gdn_kernels.py tests/gpu/test_models.py 2>&1 | tail -6; fi
if has gpu; then echo "== conformance (issues 5, 7)"; timeout ${GPU_S:-400} python -m pytest -q -p no:cacheprovider tests/gpu 2>&1 > $OUT/gpu.txt; echo "rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12; fi
if has decode; then echo "== decode (issue 5)"; timeout 300 python bench/decode.py --backend sm90 ${DECODE_ARGS:---ctx 512} --json $OUT/decode.json 2>&1 | grep -v "ops of" | tail -12; fi
if has peer; then echo "== transformers peer"; timeout 150 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep -E "RESULT|FAILED|copy"; fi
if has quant; then echo "== quant kernels (issue 7)"; timeout 60 python -m pytest -q -rf -p no:cacheprovider tests/gpu/test_quant_kernels.py 2>&1 | tail -12; fi
if has hybrid; then echo "== hybrid reference vs transformers (issue 3)"; timeout 80 python bench/hybrid_reference.py 2>&1 | tee $OUT/hybrid.txt | tail -16; fi
if has verify; then echo "== verify cost (issue 6)"; timeout 60 python bench/verify_cost.py --layers 16 --shapes qwen3.5-27b --widths ${VERIFY_WIDTHS:-1,4,8,16} --ctx 1024 --json $OUT/verify.json 2>&1 | tail -14; fi
if has profile; then echo "== decode profile (27B shape, 8 layers)"; timeout 50 python bench/decode_profile.py --shape qwen3.5-27b --layers 8 2>&1 | grep -v "^ninfer: compiling" | head -34; fi
if has qpipe; then echo "== quant GEMV A/B (bench/quant.py, previous vs new qmma)"; timeout 50 python bench/quant.py --parts gemv --widths 1,16 --layers 8 2>&1 | grep -v "^ninfer: compiling" | tail -30; fi
if has kvsplit; then echo "== int4/int8 KV attention at 32K, keys per split A/B"; timeout 60 python bench/kv_attention.py --shapes 8b,27b --ctx 32768 --tokens 1,4 --splits 64,128 2>&1 | grep -v "^ninfer: compiling" | tail -16; fi
if has qbench; then echo "== quant decode (issue 7)"; timeout 40 python bench/quant.py --layers 16 --peak-gbs 4200 2>&1 | tail -12; fi
if has kv; then echo "== KV attention bf16 / int8 / int4 (issue 7)"; timeout 100 python bench/kv_attention.py --backend sm90 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/kv.txt | tail -16; fi
if has qe2e; then echo "== quantised-weight decode end to end (issue 7)"; timeout ${QE2E_S:-120} python bench/quant.py --parts e2e 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | tail -20; fi
