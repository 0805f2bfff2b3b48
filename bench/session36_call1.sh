# Session 36, call 1: on an H200 only (the goals' GPU); on any other GPU nothing. Session 35's prepared call 7 with
# what it needs beside it, in one call:
# - bench/chain_bound.py, both models, 16 KB and 32 KB dealt units: do separate launches also stream near 0.9 of copy
#   bandwidth on the H200 (0.900-0.907 on H100s), where session 31's real GEMV chain alone reached 0.737, and does the
#   persistent form with units dealt as rings free gain more there than on the H100 (+8.9-9.9 %)?
# - the same, 27B, with the int4 IMMA products in 15 consumer warps (session 35 call 9: 0.929 on an H100);
# - the real decode (bench/quant.py) default and without the norms, attention and recurrence, both models;
# - bench/qmv_balance.py: do the 320-tile GEMVs (down: 0.73 of copy in session 31's H200 timeline) lose to uneven
#   blocks an SM on the H200?
# Run it at the commit that adds it (main). Kernels: bash bench/precompile_sm90.sh .kc_s36;
# bash bench/precompile_quant_variants.sh .kc_s36 "" (the sm75 / sm86 / sm89 cubins removed), carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s36/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
CB_UNITS="16384 32768" bash bench/h200_diag.sh
