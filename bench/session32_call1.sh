# Session 32, call 1: (1) the one-token Gated DeltaNet recurrence asking L2, after its PDL wait, for later GEMVs' weights
# (NINFER_GDN_AHEAD: the first 8 / 16 MB of each half of gate_up's codes; session 31's call 5, not run then); (2) the
# 27B's 320-tile one-token GEMVs (down, GDN out_proj, attention o) with a tile's warps in a cluster of 2 blocks
# (qmv1xc / qmv1fc, -DQMV_CLUSTER=1), end to end and in bench/qmv_balance.py: do those GEMVs lose to uneven blocks an
# SM on the H200, where they are more bound by their products than on the H100 (session 24 found no penalty there)?
# Their GPU tests first. 27B W4A16, int4 lm_head.
# Kernels: bash bench/precompile_sm90.sh .kc_s32; bash bench/precompile_quant_variants.sh .kc_s32 "-DQMV_CLUSTER=1".
# Run it at commit e46820d: the variants and tests it names were removed from main after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s32/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_gdn_kernels.py tests/gpu/test_quant_kernels.py -k "ahead_changes_nothing or cluster_forms" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; C="the 320-tile GEMVs in clusters of 2 blocks (qmv1fc / qmv1xc, QMV_CLUSTER)"
G8="the recurrence asks L2 for gate_up's first 8 MB a half (GDN_AHEAD=g8)"; G16="the recurrence asks L2 for gate_up's first 16 MB a half (GDN_AHEAD=g16)"
timeout 220 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$C;$G8;$G16;$D;$C;$G8;$G16" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 150 python bench/qmv_balance.py > $OUT/balance.txt 2>&1; grep -E "^\||GPU|Error|Traceback" $OUT/balance.txt | cut -c1-200
