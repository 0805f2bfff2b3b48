# Session 29, call 1: Qwen3.5's attention output gate applied by the combine kernel (attention_gated, new default)
# against its own sigmoid_mul launch; decode attention in blocks of <= 4 / <= 2 query rows (the 27B's 6 q heads a kv
# head then run the one-pass form, which requests its first K/V rows before its PDL wait); the 27B without norms,
# attention and recurrence (the GEMVs' own bound); the norm letting the next kernel launch after its row's loads or at
# its exit instead of after its wait (NINFER_NORM_TRIGGER_AT); GPU tests of the fused gate and the model tests; transformers.
# Kernels: bash bench/precompile_sm90.sh .kc_s29, then
# bash bench/precompile_variants.sh .kc_s29 "-DNINFER_NORM_TRIGGER_AT=1/-DNINFER_NORM_TRIGGER_AT=2".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 140 python -m pytest -q -x tests/gpu/test_attention.py tests/gpu/test_ops.py tests/gpu/test_quant_kernels.py -k "gated or sigmoid_mul or model_decodes" -p no:cacheprovider > $OUT/tests.txt 2>&1; tail -4 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; G="the output gate in its own launch (sigmoid_mul, before session 29)"
R4="attention in blocks of <= 4 query rows (BLOCK_ROWS=4)"; R2="attention in blocks of <= 2 query rows (BLOCK_ROWS=2)"
W="without norms, attention, GDN recurrence"; N1="the norm lets the next launch after its row's loads (NINFER_NORM_TRIGGER_AT=1)"
N2="the norm lets the next launch at its exit (NINFER_NORM_TRIGGER_AT=2)"
timeout 330 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$G;$R4;$R2;$N1;$N2;$W;$D;$G;$R4;$R2;$N1;$N2" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 90 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
