# Session 29, call 2: one token's decode attention in blocks of <= 2 query rows (DECODE_BLOCK_ROWS, new default)
# against <= 8 (before), and the output gate in the combine with its final step spread over a warp a 128-value group
# (fixed_group32) against its own sigmoid_mul launch, 27B and 8B; GPU tests of attention (every rows-a-block
# setting), the fused gate and the model tests; transformers beside. Kernels: bash bench/precompile_sm90.sh .kc_s29.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 130 python -m pytest -q -x tests/gpu/test_attention.py tests/gpu/test_ops.py tests/gpu/test_quant_kernels.py -k "gated or 32k_table or graph or sigmoid_mul or model_decodes or (test_paged_attention and not cluster)" -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -4 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; G="the output gate in its own launch (sigmoid_mul, before session 29)"
B8="decode attention in blocks of <= 8 query rows (before session 29)"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$B8;$G;$D;$B8;$G" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$B8;$D;$B8" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 80 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
