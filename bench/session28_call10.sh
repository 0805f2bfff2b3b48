# Session 28, call 10: what one kernel boundary costs in a CUDA graph with PDL (bench/pdl_handoff.py), and the final
# defaults' GPU model tests (seeded). Kernels: bash bench/precompile_sm90.sh .kc_s28 at the commit that runs it.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s28/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python bench/pdl_handoff.py 2>&1 | grep -v Warn | tail -12
timeout 100 python -m pytest -q tests/gpu/test_quant_kernels.py -k "model_decodes or norm_writes" -p no:cacheprovider 2>&1 | tail -2
