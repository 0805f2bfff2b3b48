# Session 35, call 3: call 2's cuts with the weight loads ahead of the PDL wait extended from the residual add + RMSNorm
# to rope_write_kv's q / k head norms and the gated recurrence's output norm (one switch, -DNINFER_W_EARLY=0 restoring
# every load after the wait), against the builds before them, three passes; their GPU tests first (every backend that
# runs here: the gated recurrence, the norms, rope_write_kv, the fixed-point forms, the quantised models' decode).
# Run it at the commit that adds it (main).
# Kernels: bash bench/precompile_sm90.sh .kc_s35m; bash bench/precompile_variants.sh .kc_s35m
#   "-DNINFER_GDN_Z_EARLY=0/-DNINFER_W_EARLY=0/-DNINFER_GDN_Z_EARLY=0 -DNINFER_W_EARLY=0";
#   bash bench/precompile_quant_variants.sh .kc_s35m "".
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s35m/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 150 python -m pytest -q -p no:cacheprovider tests/gpu/test_gdn_kernels.py tests/gpu/test_fused.py tests/gpu/test_quant_kernels.py -k "gated or add_rms_norm or rope_write_kv or norm_writes or decodes_through or replays" > $OUT/tests.txt 2>&1; tail -3 $OUT/tests.txt | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; Z="z read after the recurrence's sums (-DNINFER_GDN_Z_EARLY=0, before session 35)"
W="the small ops' weights read after their PDL wait (-DNINFER_W_EARLY=0, before session 35)"; B="both, as before session 35"
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$B;$W;$Z;$D;$B;$W;$Z;$D;$B;$W;$Z" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 120 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$W;$D;$W;$D;$W" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
