# Session 25, call 2: call 1 (an H100) left QMV_PREPF=2 (each one-token quantised GEMV asks L2 for its warps' next 2
# bursts before its PDL wait) between the default's two 27B rows with an int8 lm_head and 0.9 % ahead with an int4 one.
# Here the default against QMV_PREPF=2 and =4, A B C A B C, on the 27B W4A16 and 8B W8A16 decode. Kernels .kc_s25
# (bash bench/precompile_sm90.sh .kc_s25, and bench/precompile_quant_variants.sh .kc_s25 "-DQMV_PREPF=2;-DQMV_PREPF=4").
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s25/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"
P2="the next 2 bursts into L2 before the PDL wait (QMV_PREPF=2)"; P4="the next 4 bursts into L2 before the PDL wait (QMV_PREPF=4)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$P2;$P4;$D;$P2;$P4" > $OUT/e2e.txt 2>&1
timeout 70 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$P2;$P4" >> $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-200
