# Session 28, call 11: bench/pdl_handoff.py again, with the norm without its fixed-point form and the plain rms_norm;
# kernels as call 10 (.kc_s28).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python bench/pdl_handoff.py 2>&1 | grep -v Warn | tail -12
