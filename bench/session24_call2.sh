# Session 24, call 2: qmv1f (int4 one token on the integer tensor cores) the default, with its group loads predicated
# (QMV_FIXFETCH=1, call 1's fastest form), and the SwiGLU GEMV writing its row in the fixed-point form for down. The quantised kernels' GPU tests, then 27B W4A16 and 8B W8A16 end to end
# against qmv1 (bf16 products) and call 1's qmv1f in the same process, an eager kernel profile of 8 layers (PDL off),
# transformers beside it. Kernels compiled here with NVRTC 13.0 into .kc_s24 (bench/precompile_sm90.sh .kc_s24, and
# the quant library with -DQMV_FIXFETCH=0), carried.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s24/* $NINFER_KERNEL_CACHE/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
export PYTHONPATH=$PYTHONPATH:$PWD/bench
timeout 200 python -m pytest -q tests/gpu/test_quant_kernels.py tests/gpu/test_fused.py -k "not bench_variants" -p no:cacheprovider > $OUT/tests.txt 2>&1; echo tests rc $?
tail -4 $OUT/tests.txt | cut -c1-300
V="default (per tile 1..8 tokens, split 9..16);int4 one token in bf16 (qmv1, before qmv1f);qmv1f, down from the bf16 row (NINFER_QMV1F_DOWN=0);default (per tile 1..8 tokens, split 9..16)"
timeout 180 python bench/quant.py --parts e2e --no-qgemv --lm-head int8,int4 --models "27B W4A16 g128,8B W8A16 g128" --variants "$V" > $OUT/e2e.txt 2>&1
grep -E "^\| (8B|27B)|FAILED|Error|bandwidth|Traceback|usage" $OUT/e2e.txt | cut -c1-220
NINFER_PDL=0 timeout 60 python bench/quant.py --parts profile --no-qgemv --models "27B W4A16 g128" --profile-layers 8 > $OUT/profile.txt 2>&1
grep -vE "^\s*$|compiling|ops of" $OUT/profile.txt | tail -20 | cut -c1-200
timeout 100 python bench/peers/transformers_decode.py 8b 27b > $OUT/peer.txt 2>&1; grep -E "RESULT|FAILED|copy bandwidth|^transformers" $OUT/peer.txt
