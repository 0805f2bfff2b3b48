# Session 31, call 3 (asked for the H200, served by an H100): what each class of small op costs the step net (it
# launching nothing; outputs wrong), then the GPU conformance suite at main's commit (every backend that runs on sm_90:
# sm90, and sm75 / sm86 / sm89 through their sources compiled for sm_90; 360 s cut it at 5642 of 5749 tests, call 4
# ran the rest). Kernels: call 1's (.kc_s31).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s31/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
D="default (per tile 1..8 tokens, split 9..16)"; N="without the norms"; A="without attention"; G="without the GDN recurrence"
timeout 140 python bench/quant.py --parts e2e --no-qgemv --lm-head int4 --models "27B W4A16 g128" --variants "$D;$N;$A;$G;$D" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-200
timeout 70 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --models "8B W8A16 g128" --variants "$D;$N;$A;$D" > $OUT/e2e8.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e8.txt | cut -c1-200
timeout 360 python -m pytest -q -p no:cacheprovider tests/gpu -k "not bench_variants" > $OUT/tests.txt 2>&1; echo "rc $?"
grep -E "passed|failed|FAILED|Error" $OUT/tests.txt | tail -15 | cut -c1-250
