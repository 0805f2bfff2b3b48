# Session 16, call 6 (ran at 9b7592b; its cluster form and bench variant were removed after it): the Gated DeltaNet
# recurrence + output norm on a cluster of 4 blocks a value head (the sm_90 default there; NINFER_GDN_CLUSTER=0 one
# block a head, as before). The GPU conformance suite (every backend), then the
# 27B W4A16 model end to end (A, B, A in one process) and the bf16 Qwen3.5-27B shape (bench/decode.py, A, B, A, B in
# separate processes). Kernels: .kc_s16f (every backend for sm_90, the sm90 GEMV_PRE variants).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16f/* $NINFER_KERNEL_CACHE/
echo "== conformance"
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" -x 2>&1 | tail -4
echo "== quantised e2e"
D="default (per tile 1..8 tokens, split 9..16)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --e2e-layers "27B W4A16 g128=64" --variants "$D;GDN recurrence one block a head (before the cluster form);$D" 2>&1 | grep -E "^\| 27B|FAILED|Error|bandwidth|Traceback"
echo "== bf16 decode"
F='s/ sm90 gemv=auto splitk=1 pairs=- pdl=1     norm=1 fused=1//'
for c in 1 0 1 0; do
  NINFER_GDN_CLUSTER=$c timeout 100 python bench/decode.py --shapes qwen3.5-27b --ctx 512 --new 128 --prefill-repeats 1 2>&1 | grep -E "RESULT|FAILED|Error" | sed "$F" | sed "s/^/cluster=$c /"
done
