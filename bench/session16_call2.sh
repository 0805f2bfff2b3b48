# Session 16, call 2 (ran at 686cd69; its "burst 8" variants were removed after it): the burst GEMV's products alone on L1-resident weights (QMV_DIAG=3), and bursts of 8 chunks by
# width at register caps that hold them. GEMV only, 8 layers of each shape, bf16 activations. Kernels: .kc_s16b.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16b/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
V="default (per tile 1..8 tokens, split 9..16);diag: products only (weights from L1);int8 burst 8, 72 registers;int8 burst 8, 80 registers;int4 burst 8, 96 registers;int4 burst 8, 104 registers;default (per tile 1..8 tokens, split 9..16)"
timeout 400 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --variants "$V" 2>&1 | grep -E "^\||FAILED|Error|bandwidth"
