# Session 16, call 1: where the burst GEMV's time goes. GEMV only (8 layers of each shape, bf16 activations), the
# default beside two diagnostics (qgemv.cu QMV_DIAG; results wrong, speed only): the loads alone (bursts of 4 and 8
# chunks) and the products alone on L2-resident weights. Kernels: .kc_s16a (quant library only).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16a/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 400 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1,8 --variants "default (per tile 1..8 tokens, split 9..16);diag: loads only;diag: loads only, burst 8;diag: products only (weights from L2)" 2>&1 | grep -E "^\||FAILED|Error|bandwidth"
