# Session 35, call 5: bench/chain_bound.py with its new rows: the persistent kernel with each GEMV's bytes dealt in
# units that each block's producer takes as its ring frees (persist_dyn), against the even share a block (persist) and
# today's separate launches. Do the grid barriers still cost ~1.7 us each (sessions 34-35) when no block waits for an
# even share the slowest SM streams last? The 27B and 8B at 64 KB units, then the 27B at 16 KB and 256 KB.
# Run it at the commit that adds it (main). Nothing to carry: chain_bound compiles its kernels on the device.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
NINFER_CB_UNIT=65536 timeout 120 python bench/chain_bound.py > $OUT/chain.txt 2>&1; grep -v compiling $OUT/chain.txt | cut -c1-220
for u in 16384 262144; do
  NINFER_CB_UNIT=$u timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_u$u.txt 2>&1
  echo "unit $u"; grep -E "units|the same" $OUT/chain_u$u.txt | cut -c1-220
done
