# Session 35, call 7: on an H200 only (the goals' GPU), bench/chain_bound.py with 16 KB and 32 KB dealt units: does
# the persistent kernel with units taken as each ring frees stream the decode step's weights faster than today's
# separate launches there too (calls 5-6, on H100s: 0.988 against 0.900-0.907 of copy bandwidth for the 27B, 0.956
# against 0.890-0.900 for the 8B, at 16 KB units)? On any other GPU nothing. Run it at the commit that adds it (main).
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  export PYTHONPATH=$PYTHONPATH:$PWD/bench
  for u in 16384 32768; do
    NINFER_CB_UNIT=$u timeout 120 python bench/chain_bound.py > $OUT/chain_u$u.txt 2>&1
    echo "unit $u"; grep -v compiling $OUT/chain_u$u.txt | cut -c1-200
  done
else
  echo "not an H200: nothing run"
fi
