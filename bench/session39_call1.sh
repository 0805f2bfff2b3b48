# Session 39, call 1: session 38's prepared call 1 (bench/session38_call1.sh: NINFER_PM_COOP, NINFER_PM_FLANE) and
# session 37's prepared call 5 (bench/session37_call5.sh: NINFER_PM_FLOW=3, NINFER_PM_BATCH=1) in one call, since
# neither ran (no machine was lent). Every row has REL=1 and prints today's launches of the same 64 MLP blocks (CUDA
# graph) beside it, in the same process. Any GPU with sm_90; ran at commit ce6a59e. COOP and FLANE were taken out
# of persist_mlp.py after session 39 (72a730b): to run their rows again, check out ce6a59e. Kernels: .kc_s38 (bash bench/precompile_sm90.sh .kc_s38), carried.
NINFER_PM_REL=1 bash bench/pm_rows.sh .kc_s38 <<'ROWS'
NINFER_PM_FLOW=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8
NINFER_PM_FLOW=2 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1 NINFER_PM_STAGES=9
NINFER_PM_FLOW=1 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
NINFER_PM_FLOW=3
NINFER_PM_FLOW=3 NINFER_PM_BATCH=1
NINFER_PM_FLOW=1 NINFER_PM_COOP=1 NINFER_PM_CONSUMERS=8 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1
ROWS
