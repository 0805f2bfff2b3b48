# Session 35, call 2: two cuts to the small ops' paths, measured end to end against the builds before them:
# the gated Gated DeltaNet recurrence stages its output gate z with q, k, v (one round trip to L2 fewer after its PDL
# wait; -DNINFER_GDN_Z_EARLY=0 reads it after the sums, as before), and the residual add + RMSNorm loads its weight
# before its PDL wait (-DNINFER_NORM_W_EARLY=0: after, as before). Their GPU tests first (every backend that runs here).
# It ran on an uncommitted tree (d3dbbb0 plus these two cuts), where the switch was NINFER_NORM_W_EARLY, for the
# norm only, and bench/quant.py had its W label; the commit that adds this script has call 3's NINFER_W_EARLY instead.
# Kernels: bash bench/precompile_sm90.sh .kc_s35m; bash bench/precompile_variants.sh .kc_s35m
#   "-DNINFER_GDN_Z_EARLY=0/-DNINFER_NORM_W_EARLY=0/-DNINFER_GDN_Z_EARLY=0 -DNINFER_NORM_W_EARLY=0";
#   bash bench/precompile_quant_variants.sh .kc_s35m "".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35m/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_gdn_kernels.py tests/gpu/test_fused.py tests/gpu/test_quant_kernels.py -k "gated or add_rms_norm or norm_writes or decodes_through" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; Z="z read after the recurrence's sums (-DNINFER_GDN_Z_EARLY=0, before session 35)"
W="the norm's weight read after its PDL wait (-DNINFER_NORM_W_EARLY=0, before session 35)"  # (then); B="both, as before session 35"
timeout 260 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$B;$Z;$W;$D;$B;$Z;$W" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$W;$D;$W" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
