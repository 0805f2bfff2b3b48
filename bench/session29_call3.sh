# Session 29, call 3: the final defaults (decode attention in blocks of 2 rows only where a GQA group exceeds 4, the
# output gate in the combine): attention and gate GPU tests, the 27B's decode step kernel by kernel
# (bench/timeline.py), both models end to end against the attention before this session, transformers beside.
# Kernels: bash bench/precompile_sm90.sh .kc_s29 (as call 2; this call's change is the launcher's, in Python).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 60 python -m pytest -q -x tests/gpu/test_attention.py -k "gated or 32k_table" -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -2 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; B8="decode attention in blocks of <= 8 query rows (before session 29)"
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 130 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$B8;$D;$B8" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 130 python bench/timeline.py --models "27B W4A16 g128" --lm-head int4 --steps 20 > $OUT/tl27.txt 2>&1
grep -v "^\s*$" $OUT/tl27.txt | head -40 | cut -c1-230
timeout 80 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
