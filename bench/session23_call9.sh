# Session 23, call 9: call 8's GEMVs and end-to-end rows again (no tests), for the H200 if this call gets one.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s23/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "default (per tile 1..8 tokens, split 9..16);int4 one token in bf16 (before qmv1f)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 40 python bench/qmv_i8.py --builds="-DI8_MAXREG=80" > $OUT/qmv_i8.txt 2>&1; echo rc $?
grep -E "qmv1|I8_MAXREG|copy" $OUT/qmv_i8.txt | cut -c1-200
