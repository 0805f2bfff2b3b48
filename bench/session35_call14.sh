# Session 35, call 14: the GPU tests of the kernels the session changed (call 3's selection: the gated recurrence, the
# norms, rope_write_kv, the fixed-point forms, the quantised models' decode, graph replays) at main's final kernels
# (NINFER_W_EARLY; z read after the sums again), then the default against -DNINFER_W_EARLY=0 once a model.
# Run it at the commit that adds it (main). Kernels: bash bench/precompile_sm90.sh .kc_s35e;
# bash bench/precompile_quant_variants.sh .kc_s35e "", carried (the W_EARLY=0 build compiles on the device).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35e/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 120 python -m pytest -q -p no:cacheprovider tests/gpu/test_gdn_kernels.py tests/gpu/test_fused.py tests/gpu/test_quant_kernels.py -k "gated or add_rms_norm or rope_write_kv or norm_writes or decodes_through or replays" > $OUT/tests.txt 2>&1; tail -2 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; W="the small ops' weights read after their PDL wait (-DNINFER_W_EARLY=0, before session 35)"
timeout 60 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$W" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
