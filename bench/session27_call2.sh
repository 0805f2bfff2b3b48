# Session 27, call 2: qmv1x (NINFER_QMV1X=1: a one-token int4 / int8 GEMV whose row has no fixed-point form makes the
# form of each burst in the warp that multiplies it, so down, the 8B's o and lm_head run on the integer tensor cores
# too) and FIX8's predicated loads (the default after call 1) against the branch (-DQMV_FIX8P=0). Its GPU test first,
# then end to end A B C A B C in one process (8B W8A16, 27B W4A16), transformers beside, then the fixed-point tests on
# the default build. Kernels compiled here with NVRTC 13.0: bash bench/precompile_sm90.sh .kc_s27, then
# bash bench/precompile_quant_variants.sh .kc_s27 "-DQMV_FIX8P=0".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s27/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 90 python -m pytest -q tests/gpu/test_quant_kernels.py -k "made_from_the_row" -p no:cacheprovider -x > $OUT/tests_x.txt 2>&1
echo "tests [qmv1x] rc $?: $(grep -E "passed|failed" $OUT/tests_x.txt | tail -1 | cut -c1-200)"; grep -E "^E |Error" $OUT/tests_x.txt | head -5 | cut -c1-250
D="default (per tile 1..8 tokens, split 9..16)"; P0="int8 fixed point, a branch around the burst loads (QMV_FIX8P=0, before session 27)"
X="one token without a form makes it from the row (qmv1x, NINFER_QMV1X=1)"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$P0;$X;$D;$P0;$X" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-220
timeout 130 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$X;$D;$X" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
timeout 120 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed_point or int8_model" -p no:cacheprovider -x > $OUT/tests.txt 2>&1
echo "tests [default] rc $?: $(grep -E "passed|failed" $OUT/tests.txt | tail -1 | cut -c1-200)"; grep -E "^E |Error" $OUT/tests.txt | head -3 | cut -c1-200
