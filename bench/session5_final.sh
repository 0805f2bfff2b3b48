# The integrator's final device call of session 5 (bench/RESULTS.md): run from the repo root on the H200 with the
# kernels precompiled here (`bash bench/precompile_sm90.sh .kc_s5d`, the attention variant with
# bench/precompile_variants.sh, the quantised GEMV variants into .kc_s5q). Steps in order of need (device budget).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s5d/* .kc_s5q/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "== conformance"; timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/gpu.txt 2>&1; echo rc $?; grep -E "passed|failed|FAILED|Error" $OUT/gpu.txt | tail -12
OLD="-DNINFER_ATTN_TWO_PASS -DNINFER_ATTN_COMBINE_LATE"
echo "== attention"; timeout 60 python bench/attn_decode.py --ctx 512,4096 --tokens 1,4 --capacity 32768 --variants "old:$OLD:32:0:8;new:" 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/attn.txt | tail -12
for args in "llama3-8b --ctx 512,8192" "qwen3.5-27b --ctx 512"; do
  echo "== decode $args"; timeout 100 python bench/decode.py --shapes $args --new 128 --capacity 32768 --prefill-repeats 1 2>&1 | grep -E "RESULT|FAILED|copy bandwidth" | sed 's/ gemv=auto splitk=1 pdl=1     norm=1 fused=1 opts=[^:]*: decode/: decode/' | tee -a $OUT/decode.txt
done
echo "== peer"; timeout 80 python bench/peers/transformers_decode.py 8b 27b 2>&1 | grep -E "RESULT|FAILED|copy" | tee $OUT/peer.txt
echo "== quant gemv"; timeout 60 python bench/quant.py --parts gemv --no-qgemv --widths 1 --layers 8 --variants "default (per tile 1..8 tokens, split 9..16);default, QM_U=3;default, maxrregcount 64" 2>&1 | grep -v "^ninfer: compiling" | tee $OUT/qgemv.txt | grep -E "^\||GPU|FAILED"
echo "== quant e2e"; timeout 120 python bench/quant.py --parts e2e --no-qgemv --variants "default (per tile 1..8 tokens, split 9..16);default, QM_U=3;default, maxrregcount 64" 2>&1 | grep -v "^ninfer: compiling\|ops of" | tee $OUT/qe2e.txt | grep -E "^\||FAILED"
echo "== quant kernels, -DQM_U=3"; NINFER_QMMA_EXTRA="-DQM_U=3" timeout 50 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "not bench_variants" 2>&1 | tail -2
