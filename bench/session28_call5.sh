# Session 28, call 5: which norms gain from letting the next kernel launch before their PDL wait: the final norm
# (lm_head after it), the input norms, the post norms, all (NINFER_NORM_TRIGGER). Kernels as call 3/4 (.kc_s28).
# Ran at commit 51c6aab; the NINFER_NORM_TRIGGER variants it names were removed after (27B slower, 8B level to +2 %).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; T="the norm lets the next kernel launch before its wait (NINFER_NORM_TRIGGER=1)"
F="the final norm lets lm_head launch before its wait (NINFER_NORM_TRIGGER=2)"
I="the input norms let the next kernel launch before their wait"; P="the post norms let the next kernel launch before their wait"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$F;$I;$P;$T;$D;$F;$I;$P;$T" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "8B W8A16 g128" --variants "$D;$F;$D;$F" > $OUT/e2e8b.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8b.txt | cut -c1-200
timeout 230 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$F;$D;$F" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
