# Session 30, call 1: the residual add and norm in the last block of the GEMV before them (NINFER_QMV_NORM=1) against
# the default, both models; its GPU tests first; transformers beside. Kernels: bash bench/precompile_sm90.sh .kc_s30.
# Run it at commit 6cf7ebf: the variants it names were removed from bench/quant.py after the session's measurements.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s30/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 200 python -m pytest -q -x -p no:cacheprovider tests/gpu/test_quant_kernels.py -k "norm_in_the_gemv or norms_in_the_gemvs or norm_writes" > $OUT/tests.txt 2>&1; tail -4 $OUT/tests.txt
D="default (per tile 1..8 tokens, split 9..16)"; N="the norms in the GEMVs' last block (NINFER_QMV_NORM=1)"
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$D;$N" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 100 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$N;$D;$N" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 80 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
