# Session 27, call 1: the one-token fixed-point GEMVs' loops. int8 (FIX8, the 8B W8A16): loads predicated (no branch
# in the loop, as int4's since session 24), bursts of 8 chunks (two 128-k groups) at 80 registers, the next 2 bursts
# into L2 before the PDL wait; int4 (qmv1f, the 27B W4A16): bursts of 8 chunks at 96 registers. End to end A B C D A B
# C D in one process, transformers beside; then the fixed-point GPU tests on the default build and on each variant's
# (NINFER_QMMA_EXTRA). Kernels compiled here with NVRTC 13.0: bash bench/precompile_sm90.sh .kc_s27, then
# bash bench/precompile_quant_variants.sh .kc_s27 "$(bench/session27_builds)" (the builds below). The losing variants,
# the build list and the test lists were removed after the session: commit cc5373e has them all.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s27/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; P="int8 fixed point, predicated loads (QMV_FIX8P=1)"
B8="int8 fixed point, predicated, bursts of 8 chunks at 80 registers (QMV_FIX8_BURST=8)"
P2="int8 fixed point, predicated, the next 2 bursts into L2 before the PDL wait (QMV_PREPF8=2)"
F4="int4 fixed point in bursts of 8 chunks at 96 registers (QMV_FIX4_BURST=8)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$P;$B8;$P2;$D;$P;$B8;$P2" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-220
timeout 110 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$F4;$D;$F4" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 8b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
timeout 100 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed_point or int8_model" -p no:cacheprovider -x > $OUT/tests.txt 2>&1
echo "tests [default] rc $?: $(grep -E "passed|failed" $OUT/tests.txt | tail -1 | cut -c1-200)"; grep -E "^E |Error" $OUT/tests.txt | head -3 | cut -c1-200
set -f  # the test ids' brackets; bench/session27_tests{4,8}.txt: the fixed-point kernel tests, bf16 activations, fp16 scales
for X in "8:-DQMV_FIX8P=1" "8:-DQMV_FIX8P=1 -DQMV_FIX8_BURST=8 -DQMV_MAXREGF8=80" "8:-DQMV_FIX8P=1 -DQMV_PREPF8=2" "4:-DQMV_FIX4_BURST=8 -DQMV_MAXREGF4=96"; do
  NINFER_QMMA_EXTRA="${X#*:}" timeout 60 python -m pytest -q $(cat bench/session27_tests${X%%:*}.txt) -p no:cacheprovider > $OUT/tests.txt 2>&1
  echo "tests [$X] rc $?: $(grep -E "passed|failed" $OUT/tests.txt | tail -1 | cut -c1-200)"; grep -E "^E |Error" $OUT/tests.txt | head -3 | cut -c1-200
done
