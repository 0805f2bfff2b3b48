# Session 31, call 5 (prepared, NOT RUN: the session's device time ran out; run it at commit 08753fa, whose code main
# does not have): the one-token Gated DeltaNet recurrence asking L2, after its PDL wait, for later GEMVs' weights
# (NINFER_GDN_AHEAD: out_proj's codes, the first MB of gate_up's halves), 27B W4A16; its GPU test first.
# Kernels: bash bench/precompile_sm90.sh .kc_s31b (gdn_kernels.cuh changed: every backend's library).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 60 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_gdn_kernels.py -k "ahead_changes_nothing" > $OUT/tests.txt 2>&1; tail -2 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; O="the recurrence asks L2 for out_proj (GDN_AHEAD=o)"
OG="the recurrence asks L2 for out_proj and gate_up's first 8 MB a half (GDN_AHEAD=o+g8)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$O;$OG;$D;$O;$OG" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
