# Session 39, call 4 (run inline on call 3's warm H100, commit 6bcf428's persist_mlp.py): the best form
# (FLOW=1 REL=1 BATCH=1) with units of 8 groups (8 KB of int4 codes) and 16 or 20 stages, beside 16 groups.
source bench/device_env.sh
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s38/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
n=0
while read -r row; do
  n=$((n+1))
  env NINFER_PM_REL=1 NINFER_PM_FLOW=1 NINFER_PM_BATCH=1 $row timeout 30 python bench/persist_mlp.py > $OUT/u$n.txt 2>&1
  echo "row $n: $row: rc $?"; grep -v compiling $OUT/u$n.txt | grep -E "CHECK|persistent|launches|Error|error" | tail -5 | cut -c1-200
done <<'ROWS'
NINFER_PM_UG=8 NINFER_PM_STAGES=20
NINFER_PM_UG=8 NINFER_PM_STAGES=16
NINFER_PM_UG=16
ROWS
