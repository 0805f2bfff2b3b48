# Session 31, call 1: where the quantised decode stands (main's defaults, commit in RESULTS) and where its step's time
# goes, kernel by kernel (bench/timeline.py), both models; three settings tuned on H100s since session 25; transformers
# beside. The small ops launching nothing (outputs wrong) show the GEMVs' own bound.
# Kernels: bash bench/precompile_sm90.sh .kc_s31; bash bench/precompile_quant_variants.sh .kc_s31 ";-DQMV_PREPF=0;-DQMV_PREPF=4".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; W="without norms, attention, GDN recurrence"
P0="no bursts into L2 before the PDL wait (QMV_PREPF=0, before session 25)"; P4="the next 4 bursts into L2 before the PDL wait (QMV_PREPF=4)"
A8="decode attention in blocks of <= 8 query rows (before session 29)"
timeout 180 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$W;$P0;$P4;$A8;$D" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 90 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$W;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 100 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --steps 20 > $OUT/tl27.txt 2>&1
grep -v "^\s*$" $OUT/tl27.txt | head -32 | cut -c1-200
timeout 80 python bench/timeline.py --models "8B W8A16 g128" --lm-head int8 --steps 20 > $OUT/tl8.txt 2>&1
grep -v "^\s*$" $OUT/tl8.txt | head -24 | cut -c1-200
timeout 70 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
