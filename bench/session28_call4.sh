# Session 28, call 4: the norm's trigger first (NINFER_NORM_TRIGGER=1) with and without the int4 GEMVs' bursts into L2
# before their PDL wait (QMV_PREPF), A/B end to end. Kernels: precompile_sm90.sh .kc_s28, then
# precompile_quant_variants.sh .kc_s28 "-DQMV_PREPF=0".
# Ran at commit 51c6aab; the NINFER_NORM_TRIGGER variants it names were removed after (27B slower, 8B level to +2 %).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; T="the norm lets the next kernel launch before its wait (NINFER_NORM_TRIGGER=1)"
TP="the same, no bursts into L2 before the PDL wait (NINFER_NORM_TRIGGER=1, QMV_PREPF=0)"; P="no bursts into L2 before the PDL wait (QMV_PREPF=0, before session 25)"
timeout 250 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$T;$TP;$P;$D;$T;$TP;$P" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$T;$D;$T" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
