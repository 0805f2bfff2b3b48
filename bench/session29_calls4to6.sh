# Session 29, calls 4-6 (on the machine warm after call 3, kernels of call 2, commit ef19d50): launcher settings of
# decode attention that need no kernel build, as variants added to bench/quant.py's table in the process (not kept
# in VARIANTS: none won). Kernels: bash bench/precompile_sm90.sh .kc_s29. Run one call's block at a time.
source bench/device_env.sh; mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s29/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench; cd bench
# call 4: the 27B's group of 6 in blocks of 1 row (6 blocks) against 2 (the default)
timeout 150 python -c "
import sys, quant as q
q.VARIANTS['decode attention in blocks of 1 query row'] = dict(split=(16,), attn_rows=1)
D=q.DEFAULT; R1='decode attention in blocks of 1 query row'
sys.argv=['quant.py','--parts','e2e','--no-qgemv','--lm-head','int4','--models','27B W4A16 g128','--variants',';'.join([D,R1,D,R1])]
q.main()" 2>&1 | grep -E "^\| 27B|Error|Traceback" | cut -c1-200
# call 5: the fewest keys a split (MIN_SPLIT, 32 the default) 64 and 16, 27B
timeout 170 python -c "
import sys, quant as q
from ninfer.kernels import attention
M64='decode attention, splits of >= 64 keys (MIN_SPLIT 64)'; M16='decode attention, splits of >= 16 keys (MIN_SPLIT 16)'
q.VARIANTS[M64] = dict(split=(16,)); q.VARIANTS[M16] = dict(split=(16,))
orig = q.variant
def v(label):
    orig(label)
    attention.MIN_SPLIT = 64 if label == M64 else 16 if label == M16 else 32
q.variant = v
D=q.DEFAULT
sys.argv=['quant.py','--parts','e2e','--no-qgemv','--lm-head','int4','--models','27B W4A16 g128','--variants',';'.join([D,M64,M16,D,M64,M16])]
q.main()" 2>&1 | grep -E "^\| 27B|Error|Traceback" | cut -c1-200
# call 6: the 8B's decode attention as one cluster launch (each NINFER_ATTN_CLUSTER form) against split + combine
timeout 170 python -c "
import os, sys, quant as q
F=('cluster16w4','cluster8w8','cluster16w8')
L={f: 'decode attention as one cluster launch (NINFER_ATTN_CLUSTER='+f+')' for f in F}
for l in L.values(): q.VARIANTS[l] = dict(split=(16,))
orig = q.variant
def v(label):
    orig(label)
    os.environ['NINFER_ATTN_CLUSTER'] = next((f for f, l in L.items() if l == label), '0')
q.variant = v
D=q.DEFAULT
vs=[D]+list(L.values())
sys.argv=['quant.py','--parts','e2e','--no-qgemv','--lm-head','int8','--models','8B W8A16 g128','--variants',';'.join(vs+vs)]
q.main()" 2>&1 | grep -E "^\| 8B|Error|Traceback" | cut -c1-200
