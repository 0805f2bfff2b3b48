# Session 39, call 2 (run inline on call 1's warm H100, commit ce6a59e): NINFER_PM_BATCH=1, call 1's winner, with
# FLOW=2, with DIAG=3 (no barrier or norm before gate_up; outputs wrong), and with 11 stages for 8 consumer warps.
# Every row has REL=1 and BATCH=1. Kernels: .kc_s38, carried.
NINFER_PM_REL=1 NINFER_PM_BATCH=1 bash bench/pm_rows.sh .kc_s38 <<'ROWS'
NINFER_PM_FLOW=2
NINFER_PM_FLOW=1 NINFER_PM_DIAG=3
NINFER_PM_FLOW=2 NINFER_PM_STAGES=11 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=1 NINFER_PM_STAGES=11 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=2
NINFER_PM_FLOW=1
ROWS
