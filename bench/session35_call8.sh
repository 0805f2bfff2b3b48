# Session 35, call 8: the 27B step in bench/chain_bound.py's persistent kernel with 16 KB units dealt as rings free
# (calls 5-6: 0.988 of copy bandwidth on an H100, 481 grid barriers, no GEMV work), with each consumer warp waiting
# NINFER_CB_WORK clock cycles a stage it read, a stand-in for the products: how much product time a stage hides behind
# the stream (a 16 KB stage an SM streams in about 1330 cycles at 3.2 TB/s on 132 SMs, 950 at 4.5 TB/s).
# Run it at the commit that adds it (main).
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for w in 500 1000 1500 2000 3000; do
  NINFER_CB_UNIT=16384 NINFER_CB_WORK=$w timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_w$w.txt 2>&1
  echo "work $w"; grep -E "copy bandwidth|units|the same" $OUT/chain_w$w.txt | cut -c1-200
done
