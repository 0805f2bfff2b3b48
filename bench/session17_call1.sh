# Session 17 (prepared; no device was lent in session 17, so not yet run), call 1: the int4 / int8 one-token burst
# GEMV (8 layers of each shape, GEMV only) with nvidia-smi's SM clock, power and clock event reasons sampled while each
# row's graph replays for 2 s (bench/quant.py --power): the default, its loads alone and its products alone
# (QMV_DIAG), the one-token MMA with B columns 1-7 zero (QMV_ZB), the next burst in flight with the activations
# loaded before it (QMV_PIPE, QMV_XFIRST) at several register limits, and the persistent int4 form (QMV_PERSIST).
# First bench/load_order.py (does an L1 hit issued after an HBM miss wait for it?); last the persistent form's GPU
# tests (bit for bit the default). Kernels: .kc_s17a (sm90 backend, quant variants; bench/precompile_quant_variants.sh
# with the options of each variant, in bench/quant.py's order).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s17a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,power.max_limit --format=csv,noheader
timeout 50 python bench/load_order.py  # do a warp's loads return in order? (the hypothesis the forms below test)
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;one token, B columns 1-7 zero;diag: loads only;diag: products only (weights from L1)"
V="$V;next burst in flight, activations after it (PIPE);PIPE + XFIRST, 96 / 80 registers"
V="$V;PIPE + XFIRST, 128 / 96 registers;PIPE + XFIRST, bursts of 2, 72 / 64 registers"
V="$V;PIPE + XFIRST, bursts of 2, 64 / 64 registers;persistent blocks (QMV_PERSIST);persistent blocks, 96 registers;$D"
timeout 330 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1 --power 2 --variants "$V" 2>&1 | grep -E "^\||power|FAILED|Error|bandwidth|Traceback"
timeout 170 python -m pytest -q -p no:cacheprovider tests/gpu/test_quant_kernels.py -k persistent 2>&1 | tail -15
