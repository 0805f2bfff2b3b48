# The H200 questions no call has answered yet (session 36 first, then session 40), run from a call script on the
# device machine after bench/device_env.sh and its kernel cache, with bench/ on PYTHONPATH. Units of chain_bound's
# dealt rows: CB_UNITS (default 16384).
# - bench/chain_bound.py, both models: do today's launches stream near 0.9 of copy bandwidth on the H200 too, and
#   does the persistent form with dealt units gain more there than on the H100? Then the 27B with the int4 IMMA
#   products in 15 consumer warps;
# - the real decode (bench/quant.py), default and without the norms, attention and recurrence, both models;
# - bench/qmv_balance.py: do the 320-tile GEMVs lose to uneven blocks an SM on the H200?
for u in ${CB_UNITS:-16384}; do
  NINFER_CB_UNIT=$u timeout 100 python bench/chain_bound.py > $OUT/chain_u$u.txt 2>&1
  echo "chain_bound, unit $u"; grep -v compiling $OUT/chain_u$u.txt | cut -c1-200
done
NINFER_CB_UNIT=16384 NINFER_CB_PRODUCTS=1 NINFER_CB_CONSUMERS=15 timeout 60 python bench/chain_bound.py --models 27B > $OUT/chain_p15.txt 2>&1
echo "products, 15 consumer warps"; grep -E "copy bandwidth|units|the same|Error|error" $OUT/chain_p15.txt | cut -c1-200
D="default (per tile 1..8 tokens, split 9..16)"; X="without norms, attention, GDN recurrence"
timeout 130 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$X;$D" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 80 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$X;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 60 python bench/qmv_balance.py > $OUT/bal.txt 2>&1; cut -c1-200 $OUT/bal.txt
