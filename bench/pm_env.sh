# Sourced on the device machine (repo root) by the persist_mlp call scripts and bench/pm_rows.sh: bench/device_env.sh,
# the GPU's name and clocks, the precompiled kernels of folder $1 (bash bench/precompile_sm90.sh $1, carried) in the
# kernel cache, bench/ on PYTHONPATH. PM_READY=1 then tells pm_rows.sh that this is done.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp $1/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench PM_READY=1
