# Session 16, call 3 (ran at 686cd69; the skew variants were removed after it): the burst GEMV with the warps of a scheduler out of step (QMV_SKEW: a sleep after the first
# burst by phase), against the default, A, B, ..., A. GEMV only, 8 layers of each shape. Kernels: .kc_s16c.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16c/* $NINFER_KERNEL_CACHE/
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;skew 600 ns, 2 phases;skew 1200 ns, 4 phases;skew 1600 ns, 2 phases;$D"
timeout 400 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --variants "$V" 2>&1 | grep -E "^\||FAILED|Error|bandwidth"
