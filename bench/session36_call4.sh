# Session 36, call 4: bench/persist_mlp.py after call 3 (H100: 0.705-0.718 of copy bandwidth against 0.886-0.894 for
# today's launches; a hang with the consumers doing nothing). Three changes: a stage is taken only once the producer
# has issued that fill (its number in the stage's meta: a phase test alone could pass on the slot's fill before last,
# which is what hung); a warp claims its next stage only after its unit's epilogue (a claimed stage waited for it);
# gate_up's units dealt group-major, one count a 128-group (SwiGLU and the form made by the group's last unit, one
# level of counts instead of two). New: NINFER_PM_FLOW=1, no grid barrier before down: each down unit waits for
# its own groups' forms (a flag a group). Rows: the consumers skipping their products (NINFER_PM_DIAG=1), also their epilogues
# (2), or keeping both with no grid barriers, norm or form copy (3); outputs wrong in those three.
# Any GPU with sm_90. Not run in session 36 (no device time left); its rows ran as session 37's call 1
# (bench/session37_call1.sh, at e551f8d, with new rows). To rerun it as written, run it at 3c8e0a0 (persist_mlp's
# kernel text there is da457b3's). Kernels: .kc_s36, carried.
source bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $NINFER_KERNEL_CACHE && cp .kc_s36/* $NINFER_KERNEL_CACHE/
export PYTHONPATH=$PYTHONPATH:$PWD/bench
for v in "10 10 16 0 0" "10 10 16 0 1" "10 10 16 3 0" "10 10 16 2 0" "10 10 16 1 0"; do
  set -- $v
  NINFER_PM_STAGES=$1 NINFER_PM_CONSUMERS=$2 NINFER_PM_UG=$3 NINFER_PM_DIAG=$4 NINFER_PM_FLOW=$5 timeout 60 python bench/persist_mlp.py > $OUT/pm_$1_$2_$3_$4_$5.txt 2>&1
  echo "stages $1, consumers $2, groups a unit $3, diag $4, flow $5: rc $?"; grep -v compiling $OUT/pm_$1_$2_$3_$4_$5.txt | tail -7 | cut -c1-250
done
