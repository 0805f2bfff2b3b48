# Session 35, call 10: do the persistent kernel's rings absorb a small op's hold? Calls 5-6 on an H100: holding every
# block's consumers 2.25 us at each of the 27B's 225 small ops added 350-360 us to the step with 16 KB units dealt
# (506 us held), though a 192 KB ring an SM holds about 8 us of its stream. Here the hold at 1 and 4 us (192 KB ring),
# and 2.25 us with rings of 6 x 16 KB and 3 x 16 KB. Run it at the commit that adds it (main).
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for h in 1.0 4.0; do
  NINFER_CB_UNIT=16384 timeout 60 python bench/chain_bound.py --models 27B --small-us 27B=$h > $OUT/chain_h$h.txt 2>&1
  echo "hold $h us"; grep -E "units|the same" $OUT/chain_h$h.txt | cut -c1-200
done
for r in 6x16384 3x16384; do
  NINFER_CB_RING=$r NINFER_CB_UNIT=16384 timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_r$r.txt 2>&1
  echo "ring $r"; grep -E "units|the same" $OUT/chain_r$r.txt | cut -c1-200
done
