# Session 26, call 1: one token of an int8 weight on the integer tensor cores (qmv1f* b8: the norms' fixed-point form,
# one byte permute a register, NINFER_QMV1F_INT8, default on) and the int8 o projection asking L2 for its whole weight
# during attention (NINFER_QMV_AHEAD=1, opt-in); down from the SwiGLU GEMV's form (opt-in). GPU tests of both; the 8B W8A16 decode A/B in one process; the 27B
# W4A16 default (session 25's final kernels); transformers on the 8B shape beside them. Kernels compiled here with
# NVRTC 13.0 (bash bench/precompile_sm90.sh .kc_s26).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s26/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q tests/gpu/test_quant_kernels.py -k "fixed_point or int8_model or quantised_model_decodes" -p no:cacheprovider -x > $OUT/tests.txt 2>&1; echo tests rc $?
grep -E "passed|failed|Error|assert" $OUT/tests.txt | tail -8 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; F="int8 one token in fp16 (qmv1, NINFER_QMV1F_INT8=0, before session 26)"; A="int8 o into L2 during attention (NINFER_QMV_AHEAD=1)"; N="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
timeout 130 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D;$F;$A;$N;$D;$F" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 45 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D" > $OUT/e2e27.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e27.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 8b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
