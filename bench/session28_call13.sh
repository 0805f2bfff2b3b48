# Session 28, call 13: bench/pdl_handoff.py and bench/timeline.py after the review (trace parsing shared), the 8B's
# timeline with the final kernels. Kernels: bash bench/precompile_sm90.sh .kc_s28 (as call 12).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 60 python bench/pdl_handoff.py 2>&1 | grep -E "adds" | cut -c1-170
timeout 120 python bench/timeline.py --models "8B W8A16 g128" --lm-head int8 2>&1 | grep -E "^###|^\||^step|FAILED" | cut -c1-170
