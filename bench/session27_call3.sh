# Session 27, call 3: the defaults as they end the session (qmv1x for int4 weights, NINFER_QMV1X=4; FIX8's loads
# predicated) against qmv1x for int8 too (NINFER_QMV1X=1) and none (NINFER_QMV1X=0), A B C A B C in one process;
# the two model tests rewritten for qmv1x first, transformers beside. Kernels: call 2's (.kc_s27, the same qgemv.cu).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s27/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q tests/gpu/test_quant_kernels.py -k "model_decodes_through or made_from_the_row" -p no:cacheprovider > $OUT/tests.txt 2>&1
echo "tests rc $?: $(grep -E "passed|failed" $OUT/tests.txt | tail -1 | cut -c1-200)"; grep -E "^E |Error" $OUT/tests.txt | head -6 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; A="one token without a form makes it from the row (qmv1x, NINFER_QMV1X=1)"
O="no qmv1x (NINFER_QMV1X=0, before session 27)"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$A;$O;$D;$A;$O" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$A;$D;$A" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 8b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
