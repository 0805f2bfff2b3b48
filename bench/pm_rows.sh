# bench/persist_mlp.py once a row of stdin, each in its own process, on the device machine (repo root): a row is a set
# of NINFER_PM_ settings, added to those in the environment (e.g. NINFER_PM_REL=1). Prints each row's check and its
# two timings beside today's launches; the whole output of row n in $OUT/pmN.txt. $1: the precompiled kernel folder
# (bash bench/precompile_sm90.sh $1, carried), default .kc_s38. PM_TIMEOUT: seconds a row (default 40).
#     NINFER_PM_REL=1 bash bench/pm_rows.sh .kc_s38 <<'ROWS'
#     NINFER_PM_FLOW=1 NINFER_PM_BATCH=1
#     ROWS
[ -n "${PM_READY:-}" ] || source bench/pm_env.sh ${1:-.kc_s38}  # unless the calling script did it (bench/pm_env.sh)
n=0
while read -r row; do
  n=$((n+1))
  env $row timeout ${PM_TIMEOUT:-40} python bench/persist_mlp.py > $OUT/pm$n.txt 2>&1
  echo "row $n: $row: rc $?"; grep -E "CHECK|persistent|launches|RING|Error|error" $OUT/pm$n.txt | tail -6 | cut -c1-400
done
