# Session 33, call 2: QMV_NORMIN again, its consumers' prologue issuing every load at once (the producer's parts, 16 a
# lane, and the warp's first group of h and w: one round trip to L2, then each next group's loads before the current
# group's form), where call 1's summed the parts one load after another (the 27B 12-13 % slower). Its GPU tests
# first (call 1's failures were the tests' own: shapes the SwiGLU form does not take, and a logits-differ check that
# need not hold); 27B W4A16 (int4 lm_head) and 8B W8A16 (int8); on an H200 also -DQMV_FIX_M16=1 (level on call 1's H100).
# Also NORMIN with its producers copying their tile's residual into shared memory as they start (-DQMV_NORM_RPRE=1,
# cp.async), so their tail does not wait on L2.
# Run it at commit 4040650: main does not have these builds (not run this session: no device was given).
# Kernels: the sm90 backend's from bench/precompile_sm90.sh, and
# bash bench/precompile_quant_variants.sh .kc_s33 ";-DQMV_NORMIN=1;-DQMV_NORMIN=1 -DQMV_NORM_RPRE=1;-DQMV_FIX_M16=1".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s33/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "normin" > $OUT/tests.txt 2>&1; grep -E "passed|failed|Error" $OUT/tests.txt | tail -12 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; N="the add and norm in the GEMVs around them (QMV_NORMIN)"
M="int4 fixed-point products without the nibble shifts (QMV_FIX_M16)"; R="QMV_NORMIN, the producers' residual copied ahead (QMV_NORM_RPRE)"
V27="$D;$N;$R;$D;$N;$R"; if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then V27="$D;$N;$R;$M;$D;$N;$R;$M"; fi
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$V27" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 80 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$N;$R;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
