# Session 40, call 4: call 3's persist_mlp rows, fewer (little device time was left), on whatever GPU is given.
# Kernels: bash bench/precompile_sm90.sh .kc_s40 (carried). Rows: TDONE + PACK; with down's short tail parts
# (TAILN=2, 4 groups each); a launch a layer (PL=1, PL=2), its shared buffers now kept alive; TAKE=2; RING with TAILN.
P="NINFER_PM_FLOW=1 NINFER_PM_REL=1 NINFER_PM_BATCH=1 NINFER_PM_TDONE=1 NINFER_PM_PACK=1"
PM_TIMEOUT=35 bash bench/pm_rows.sh .kc_s40 <<ROWS
$P
$P NINFER_PM_TAILN=2
$P NINFER_PM_PL=1
$P NINFER_PM_TAKE=2
$P NINFER_PM_TAILN=2 NINFER_PM_RING=1
$P NINFER_PM_PL=2
$P
ROWS
