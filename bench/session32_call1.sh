# Session 32, call 1: the one-token Gated DeltaNet recurrence asking L2, after its PDL wait, for later GEMVs' weights
# (NINFER_GDN_AHEAD: out_proj's codes, the first MB of gate_up's halves; session 31's call 5, not run then), 27B
# W4A16, its GPU test first; then bench/qmv_balance.py (do the 320-tile projections lose to uneven blocks an SM on
# the H200, where the GEMVs are more bound by their products than on the H100, where session 24 found no penalty?).
# Kernels: bash bench/precompile_sm90.sh .kc_s32 (gdn_kernels.cuh changed: every backend's library).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s32/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 60 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k "ahead_changes_nothing" > $OUT/tests.txt 2>&1; tail -2 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; OG="the recurrence asks L2 for out_proj and gate_up's first 8 MB a half (GDN_AHEAD=o+g8)"
G8="the recurrence asks L2 for gate_up's first 8 MB a half (GDN_AHEAD=g8)"; G16="the recurrence asks L2 for gate_up's first 16 MB a half (GDN_AHEAD=g16)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$G8;$G16;$OG;$D;$G8;$G16" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 150 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; grep -E "^\||GPU|Error|Traceback" $OUT/balance.txt | cut -c1-200
