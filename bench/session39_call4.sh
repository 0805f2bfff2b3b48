# Session 39, call 4 (run inline on call 3's warm H100, commit 6bcf428's persist_mlp.py): the best form
# (FLOW=1 REL=1 BATCH=1) with units of 8 groups (8 KB of int4 codes) and 16 or 20 stages, beside 16 groups.
NINFER_PM_REL=1 NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 PM_TIMEOUT=30 bash bench/pm_rows.sh .kc_s38 <<'ROWS'
NINFER_PM_UG=8 NINFER_PM_STAGES=20
NINFER_PM_UG=8 NINFER_PM_STAGES=16
NINFER_PM_UG=16
ROWS
