# Session 24, call 4: call 3's end-to-end A/B (qmv1f, the default; qmv1; qmv1f with down's form, opt-in), each
# variant twice in one process, transformers beside it; then bench/qmv_balance.py (do 320-tile GEMVs lose to uneven
# blocks an SM?). Kernels: .kc_s24 as calls 2-3.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/ninfer_qgemv-* .kc_s24/ninfer_sm90-* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; echo rc $?; cat $OUT/balance.txt | cut -c1-160
D="default (per tile 1..8 tokens, split 9..16)"; B="int4 one token in bf16 (qmv1, before qmv1f)"; N="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128,8B W8A16 g128" --variants "$D;$B;$N;$D;$B;$N" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
