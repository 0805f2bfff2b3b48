# Session 17 (prepared, not yet run), call 2: the random-weight 27B W4A16 model end to end (int8 lm_head, pipelined
# decode) with the default kernels and call 1's variants (edit V to the ones call 1 favours). Kernels: .kc_s17a.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s17a/* $NINFER_KERNEL_CACHE/
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;persistent blocks (QMV_PERSIST);PIPE + XFIRST, 96 / 80 registers;one token, B columns 1-7 zero;persistent blocks, 96 registers;$D"
timeout 540 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --e2e-layers "27B W4A16 g128=64" --models "27B W4A16 g128" --variants "$V" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback"
