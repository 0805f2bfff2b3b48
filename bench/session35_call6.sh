# Session 35, call 6: call 5's dealt units smaller (call 5 on an H100: 64 KB units 0.929 of copy bandwidth with the
# 27B's 481 barriers, 16 KB 0.989, against 0.892 for an even share a block): the 27B and 8B at 16 KB, 8 KB and 4 KB units
# (12 x 16 KB ring), and 8 KB units in a 24 x 8 KB ring. Run it at the commit that adds it (main).
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for u in 16384 8192 4096; do
  NINFER_CB_UNIT=$u timeout 90 python bench/chain_bound.py > $OUT/chain_u$u.txt 2>&1
  echo "unit $u"; grep -E "copy bandwidth|kernels \+|units|the same" $OUT/chain_u$u.txt | cut -c1-200
done
NINFER_CB_RING=24x8192 NINFER_CB_UNIT=8192 timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_r24u8.txt 2>&1
echo "ring 24x8192 unit 8192"; grep -E "units|the same" $OUT/chain_r24u8.txt | cut -c1-200
