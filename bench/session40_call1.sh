# Session 40, call 1. Kernels: bash bench/precompile_sm90.sh .kc_s40 (carried).
# Its NORMP rows need commit 4304f00 or earlier (NORMP was taken out after the session).
# On an H200 (the goals' GPU), what no call has measured there yet:
# - bench/chain_bound.py, both models, 16 KB dealt units (and the 27B with int4 IMMA products in 15 consumer warps):
#   do today's launches stream near 0.9 of copy bandwidth there too, and does the persistent form gain more than the
#   8-10 % (27B) / 0 % (8B) it gained on H100s (session 35)?
# - the real decode (bench/quant.py): default and without the norms, attention and recurrence, both models;
# - bench/qmv_balance.py: do the 320-tile GEMVs lose to uneven blocks an SM on the H200?
# - bench/persist_mlp.py, the best form and this session's TDONE + NORMP, against today's launches.
# On any other GPU: the persist_mlp rows only (this session's TDONE, NORMP, X2 beside the best form).
source bench/pm_env.sh .kc_s40
B="NINFER_PM_FLOW=1 NINFER_PM_REL=1 NINFER_PM_BATCH=1"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  PM_TIMEOUT=45 bash bench/pm_rows.sh .kc_s40 <<ROWS
$B
$B NINFER_PM_TDONE=1 NINFER_PM_NORMP=1
ROWS
  bash bench/h200_diag.sh
else
  PM_TIMEOUT=40 bash bench/pm_rows.sh .kc_s40 <<ROWS
$B
$B NINFER_PM_TDONE=1
$B NINFER_PM_NORMP=1
$B NINFER_PM_TDONE=1 NINFER_PM_NORMP=1
NINFER_PM_FLOW=3 NINFER_PM_REL=1 NINFER_PM_BATCH=1 NINFER_PM_X2=1
NINFER_PM_FLOW=3 NINFER_PM_REL=1 NINFER_PM_BATCH=1
$B
$B NINFER_PM_TDONE=1 NINFER_PM_NORMP=1
ROWS
fi
