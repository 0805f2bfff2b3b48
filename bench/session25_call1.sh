# Session 25, call 1: the mixers' output projections on qmv1f (the GDN recurrence's output norm and the attention
# output gate write their outputs in the fixed-point form: NINFER_QMV1F_OUT, default on). GPU tests of the new forms
# (every backend) and of the quantised model's forms; the 27B W4A16 decode against session 24's default (the mixer
# outputs from their bf16 rows), the GEMVs asking L2 for their next 2 bursts before their PDL wait (QMV_PREPF=2) and
# down's opt-in form, in one process; the 8B W8A16 default; transformers on the 27B shape beside them. Kernels
# compiled here with NVRTC 13.0 (bash bench/precompile_sm90.sh .kc_s25, bench/precompile_quant_variants.sh).
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s25/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 100 python -m pytest -q tests/gpu/test_ops.py tests/gpu/test_gdn_kernels.py tests/gpu/test_quant_kernels.py -k "sigmoid_mul_writes or gdn_recurrent_gated_writes or fixed_point_form or quantised_model_decodes or fixed_point_burst_kernel_matches" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
grep -E "passed|failed|Error|assert" $OUT/tests.txt | tail -8 | cut -c1-300
D="default (per tile 1..8 tokens, split 9..16)"; O="mixer outputs from the bf16 row (NINFER_QMV1F_OUT=0, session 24's default)"; B="int4 one token in bf16 (qmv1, before qmv1f)"; N="qmv1f, down from the SwiGLU GEMV's form (NINFER_QMV1F_DOWN=1)"
P2="the next 2 bursts into L2 before the PDL wait (QMV_PREPF=2)"; P4="the next 4 bursts into L2 before the PDL wait (QMV_PREPF=4)"
timeout 170 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128" --variants "$D;$O;$P2;$N;$D;$O" > $OUT/e2e.txt 2>&1
timeout 40 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "8B W8A16 g128" --variants "$D" >> $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
timeout 60 python bench/peers/transformers_decode.py 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
