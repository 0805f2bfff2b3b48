# Session 35, call 11: call 9 for the 8B W8A16: its step in bench/chain_bound.py's persistent kernel (16 KB units dealt
# as rings free, 289 grid barriers) with the consumers running the int8 fixed-point products (NINFER_CB_PRODUCTS=2: a
# PRMT a register and one IMMA a 512-byte chunk, as FIX8), at 7, 15 and 31 consumer warps; beside it the real decode's
# GEMV chain (bench/quant.py, the norms and attention launching nothing) and the default. On an H200, call 7 after it.
# Run it at the commit that adds it (main). Kernels: .kc_s35e as call 9's, carried.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for c in 7 15 31; do
  NINFER_CB_UNIT=16384 NINFER_CB_PRODUCTS=2 NINFER_CB_CONSUMERS=$c timeout 60 python bench/chain_bound.py --models 8B > $OUT/chain_p$c.txt 2>&1
  echo "int8 products, $c consumer warps"; grep -E "copy bandwidth|kernels|units|the same|Error|error" $OUT/chain_p$c.txt | cut -c1-200
done
D="default (per tile 1..8 tokens, split 9..16)"; X="without norms, attention, GDN recurrence"
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$X;$D;$X" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash bench/session35_call7.sh; fi
