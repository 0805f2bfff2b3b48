# Session 35, call 13: on an H200, call 7 (chain_bound's dealt units there); on any other GPU, chain_bound for the 27B
# at 16 KB units once more after its kernels' setup, grid barrier and hold became shared helpers (85839a0), to see the
# rows of calls 5-6 again. Run it at the commit that adds it (main).
source bench/device_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash bench/session35_call7.sh; exit; fi
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
NINFER_CB_UNIT=16384 timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain.txt 2>&1; grep -v compiling $OUT/chain.txt | cut -c1-200
