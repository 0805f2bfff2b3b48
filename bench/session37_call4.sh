# Session 37, call 4 (run inline on call 3's warm H100; the command saved here): bench/persist_mlp.py's best form
# so far, FLOW=1 REL=1, without and with DIAG=3 (no grid barrier before gate_up and no norm; down's units still wait
# on their groups' flags and copy their groups; outputs wrong): what gate_up's boundary costs in that form.
# Any GPU with sm_90. Ran at 59ea310. Kernels: .kc_s37, carried.
source bench/device_env.sh; mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s37/* $NINFER_KERNEL_CACHE/; export PYTHONPATH=$PYTHONPATH:$PWD/bench; for d in 3 0; do NINFER_PM_FLOW=1 NINFER_PM_REL=1 NINFER_PM_DIAG=$d timeout 40 python bench/persist_mlp.py 2>&1 | grep -v compiling | tail -5 | cut -c1-200; done
