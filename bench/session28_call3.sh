# Session 28, call 3: add_rms_norm letting the next kernel launch before its PDL wait (NINFER_NORM_TRIGGER=1), A/B end
# to end and in the timeline; the seeded GPU model tests, also with the trigger first. Kernels: precompile_sm90.sh .kc_s28.
# Ran at commit 51c6aab; the NINFER_NORM_TRIGGER variants it names were removed after (27B slower, 8B level to +2 %).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for t in 0 1; do NINFER_NORM_TRIGGER=$t timeout 80 python -m pytest -q tests/gpu/test_fused.py tests/gpu/test_quant_kernels.py -k "add_rms_norm or norm_writes or model_decodes" -p no:cacheprovider > $OUT/tests$t.txt 2>&1; echo "trigger $t: $(tail -1 $OUT/tests$t.txt)"; done
D="default (per tile 1..8 tokens, split 9..16)"; T="the norm lets the next kernel launch before its wait (NINFER_NORM_TRIGGER=1)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$T;$D;$T;$D;$T" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$T;$D;$T" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 100 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --variants "$T" > $OUT/tl27t.txt 2>&1
grep -E "^###|add_rms|qmv1sf|qmv1gf|^step|FAILED" $OUT/tl27t.txt | cut -c1-200
