# Session 23, call 4: the int4 one-token forms in fixed point (qmv1f / qmv1sf / qmv1gf, the norms making the form):
# GPU tests, the GEMVs beside qmv1 and the bench kernel, then end to end against qmv1's bf16 form in the same process,
# beside transformers. Kernels: .kc_s23 (bench/precompile_sm90.sh .kc_s23; the quant library's -DQMV_DIAG=3 build;
# bench/qmv_i8.py --precompile sm_90 --builds=-DI8_MAXREG=80; NVRTC 13.0 here).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s23/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 200 python -m pytest -q tests/gpu/test_quant_kernels.py tests/gpu/test_fused.py \
  -k "fixed or qmv1g or add_rms_norm" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
tail -15 $OUT/tests.txt | cut -c1-300
timeout 120 python bench/qmv_i8.py --builds="-DI8_MAXREG=80" > $OUT/qmv_i8.txt 2>&1; echo rc $?
tail -20 $OUT/qmv_i8.txt | cut -c1-200
timeout 200 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --variants "default (per tile 1..8 tokens, split 9..16);int4 one token in bf16 (before qmv1f)" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback" $OUT/e2e.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
