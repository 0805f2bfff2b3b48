# Session 40, call 3 (calls 1-2 were served by H100s: TDONE then TDONE + PACK the best; PL failed its check: its shared buffers were freed while
# its launches still used them, fixed here). Kernels: bash bench/precompile_sm90.sh .kc_s40 (carried).
# On an H200 (the goals' GPU), what no call has measured there yet:
# - bench/chain_bound.py, both models, 16 KB dealt units (and the 27B with int4 IMMA products in 15 consumer warps):
#   do today's launches stream near 0.9 of copy bandwidth there too, and does the persistent form gain more than the
#   8-10 % (27B) / 0 % (8B) it gained on H100s (session 35)?
# - the real decode (bench/quant.py): default and without the norms, attention and recurrence, both models;
# - bench/qmv_balance.py: do the 320-tile GEMVs lose to uneven blocks an SM on the H200?
# - bench/persist_mlp.py, session 39's best form and TDONE + PACK (with TAKE=2, TAILN=2, RING), against today's launches.
# On any other GPU: the persist_mlp rows only: TDONE + PACK with TAKE=2, short tail parts of down (TAILN), PL=1 again and PL=2 (a
# launch a layer; 2: waiting before the trigger), RING, and DIAG=3 (no boundary before gate_up, outputs wrong).
source bench/pm_env.sh .kc_s40
B="NINFER_PM_FLOW=1 NINFER_PM_REL=1 NINFER_PM_BATCH=1"
P="$B NINFER_PM_TDONE=1 NINFER_PM_PACK=1"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  PM_TIMEOUT=45 bash bench/pm_rows.sh .kc_s40 <<ROWS
$B
$P
$P NINFER_PM_TAKE=2
$P NINFER_PM_TAILN=2
$P NINFER_PM_RING=1
$P NINFER_PM_PL=1
ROWS
  bash bench/h200_diag.sh
else
  PM_TIMEOUT=40 bash bench/pm_rows.sh .kc_s40 <<ROWS
$P
$P NINFER_PM_TAKE=2
$P NINFER_PM_TAILN=2
$P NINFER_PM_TAILN=2 NINFER_PM_TAILG=8
$P NINFER_PM_TAILN=4
$P NINFER_PM_TAKE=2 NINFER_PM_TAILN=2
$P NINFER_PM_PL=1
$P NINFER_PM_PL=2
$P NINFER_PM_TAILN=2 NINFER_PM_RING=1
$P
$P NINFER_PM_TAKE=2
$P NINFER_PM_DIAG=3
ROWS
fi
