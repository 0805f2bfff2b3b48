# Session 16, call 4 (ran at 686cd69; the shared-memory variants were removed after it): one token's activations in shared memory (QMV_XSMEM=1), alone and with the registers it frees
# spent on warps (int4 64 / int8 56), a burst of 8 (int4) or the next burst in flight. GEMV only (8 layers of each
# shape), then end to end (random-weight models, int8 lm_head, pipelined decode). Kernels: .kc_s16d.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s16d/* $NINFER_KERNEL_CACHE/
D="default (per tile 1..8 tokens, split 9..16)"
V="$D;x in shared memory;x in shared memory, int4 64 / int8 56 registers;x in shared memory, int4 burst 8;x in shared memory, next burst in flight;$D"
timeout 200 python bench/quant.py --parts gemv --no-qgemv --layers 8 --widths 1 --variants "$V" 2>&1 | grep -E "^\||FAILED|Error|bandwidth"
echo "== e2e"
timeout 360 python bench/quant.py --parts e2e --no-qgemv --lm-head int8 --variants "$V" 2>&1 | grep -E "^\| (8B|27B)|FAILED|Error|bandwidth"
