# Session 35, call 9: the 27B step in bench/chain_bound.py's persistent kernel (16 KB units dealt as rings free, 481
# grid barriers) with its consumers running the int4 fixed-point products on each stage (NINFER_CB_PRODUCTS=1: a
# lane's 16 bytes of codes, the token's form from shared memory, two IMMAs a 512-byte chunk, the sums folded with a
# scale; stand-in values), at 7, 15 and 31 consumer warps a block; beside it, in the same call, the real decode's
# GEMV chain (bench/quant.py with the norms, attention and the recurrence launching nothing) and the default.
# Run it at the commit that adds it (main). Kernels: bash bench/precompile_sm90.sh .kc_s35e;
# bash bench/precompile_quant_variants.sh .kc_s35e "" (the sm75 / sm86 / sm89 cubins removed), carried.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for c in 7 15 31; do
  NINFER_CB_UNIT=16384 NINFER_CB_PRODUCTS=1 NINFER_CB_CONSUMERS=$c timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_p$c.txt 2>&1
  echo "products, $c consumer warps"; grep -E "copy bandwidth|kernels|units|the same|Error|error" $OUT/chain_p$c.txt | cut -c1-200
done
D="default (per tile 1..8 tokens, split 9..16)"; X="without norms, attention, GDN recurrence"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$X;$D;$X" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
