# Session 16, call 5: what the quantised decode step spends outside its GEMVs. The random-weight models end to end
# (int8 lm_head, pipelined decode) with main's kernels, and with the norms, the decode attention, the Gated DeltaNet
# recurrence or all three replaced by ops that launch nothing (bench/quant.py "without ..." variants: outputs wrong,
# an upper bound on what removing them could win). Kernels: .kc_s16e (sm90 backend and quant library).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16e/* $NINFER_KERNEL_CACHE/
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;without the norms;without attention;without the GDN recurrence;without norms, attention, GDN recurrence;$D"
timeout 400 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$V" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback"
