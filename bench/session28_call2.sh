# Session 28, call 2: the norm's reads before its PDL wait (NINFER_NORM_EARLY) and blocks a row (NINFER_NORM_SPLIT):
# GPU tests, then A/B end to end on both models. Kernels: bash bench/precompile_sm90.sh .kc_s28.
# Ran at commit 8654db7; the norm variants it names were removed after (measured level).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python -m pytest -q -x tests/gpu/test_fused.py tests/gpu/test_quant_kernels.py -k "add_rms_norm or norm_writes or fixed_point_forms or qmv1g" -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -4 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; E0="norm: every read after its PDL wait (NINFER_NORM_EARLY=0, before session 28)"
E1="norm: only its weight before the wait (NINFER_NORM_EARLY=1)"; S2="norm: 2 blocks a row (NINFER_NORM_SPLIT=2)"; S4="norm: 4 blocks a row (NINFER_NORM_SPLIT=4)"
timeout 230 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$E0;$S2;$S4;$D;$E0;$S2;$S4" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$E0;$E1;$S4;$D;$E0;$E1;$S4" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
