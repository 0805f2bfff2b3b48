# Session 34, call 2: bench/chain_bound.py again, on an H200 if one is given (call 1 ran on an H100): the decode step's
# weight stream with no GEMV work as separate PDL launches and as one persistent kernel, and the persistent kernel's
# ring at 6 x 32 KB and 24 x 8 KB beside 12 x 16 KB (call 1's persistent rows lost to the separate launches and did
# not hide the small ops' spins: is its ring the limit?). Run it at the commit that adds it (main).
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 80 python bench/chain_bound.py > $OUT/chain.txt 2>&1; cut -c1-220 $OUT/chain.txt | grep -v compiling
for r in 6x32768 24x8192; do
  NINFER_CB_RING=$r timeout 50 python bench/chain_bound.py --models 27B > $OUT/chain_$r.txt 2>&1
  grep -E "ring|persistent" $OUT/chain_$r.txt | cut -c1-220
done
