# Session 39, call 3 (ran at commit 6bcf428): bench/persist_mlp.py's form warp (NINFER_PM_FLANE=1) with
# NINFER_PM_FSEEN=1 (commit 993b38b): it reads a group's flag only until it has seen it for the layer, and fences only
# after a unit whose flags it read (call 1's FLANE rows read every unit's flags and fenced with a fence.sc after each,
# and lost: 0.68 of copy). And NINFER_PM_PFQ (commit c6c7fb8): while the ring is full in gate_up's first 2 STAGES fills
# (the consumers at its grid barrier), the producer takes up to PFQ units ahead and asks L2 for them. Beside call 2's
# best form (FLOW=1 BATCH=1). Every row has REL=1 and prints today's launches of the same 64 MLP blocks beside it, in
# the same process. Any GPU with sm_90. FLANE, FSEEN and PFQ were taken out after this call (72a730b): to run their rows
# again, check out 6bcf428. Kernels: .kc_s38 (bash bench/precompile_sm90.sh .kc_s38), carried.
NINFER_PM_REL=1 bash bench/pm_rows.sh .kc_s38 <<'ROWS'
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=4
NINFER_PM_FLOW=1 NINFER_PM_FLANE=1
NINFER_PM_FLOW=2 NINFER_PM_FLANE=1
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=2
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 NINFER_PM_PFQ=4
NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
ROWS
