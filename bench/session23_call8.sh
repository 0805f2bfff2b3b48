# Session 23, call 8: qmv1f with its activations and groups on stepped pointers (as bench/kernels/qmv_i8.cu): GEMVs,
# end to end against qmv1's bf16 form in the same process, the GPU tests of the fixed-point forms. Kernels: .kc_s23.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s23/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python bench/qmv_i8.py --builds="-DI8_MAXREG=80" > $OUT/qmv_i8.txt 2>&1; echo rc $?
grep -E "qmv1|I8_MAXREG|copy" $OUT/qmv_i8.txt | cut -c1-200
timeout 150 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "default (per tile 1..8 tokens, split 9..16);int4 one token in bf16 (before qmv1f)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 100 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
tail -2 $OUT/tests.txt | cut -c1-300
