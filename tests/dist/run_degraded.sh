#!/usr/bin/env bash
# Check-ins and DEGRADED (SPEC H3, docs/resilience.md "Check-ins in a running
# job"): a 4-rank heal_worker job paced at 200 ms per step for 20 steps,
# with SPEC injected (or "none"), must finish on all 4 ranks without a
# recovery, a survivor must report PATTERN on stderr (the monitor's DEGRADED
# transition), and the ranks' DEGRADED count must have reached 1. The
# control (SPEC none, PATTERN "") must see no DEGRADED rank at all.
#   usage: run_degraded.sh SGRT WORKER DIR SPEC PATTERN
set -u
sgrt=$1 worker=$2 dir=$3 spec=$4 pattern=$5
rm -rf "$dir" && mkdir -p "$dir" || exit 1
export HEAL_STEPS=${HEAL_STEPS:-20} HEAL_STEP_SLEEP_MS=${HEAL_STEP_SLEEP_MS:-200}
if [ "$spec" = none ]; then
  "$sgrt" launch --label -n 4 -- "$worker" "$dir" > "$dir/log" 2>&1
else
  "$sgrt" launch --label --inject "$spec" -n 4 -- "$worker" "$dir" > "$dir/log" 2>&1
fi
rc=$?
cat "$dir/log"
[ "$rc" = 0 ] || { echo "run_degraded: the job failed ($rc)"; exit 1; }
grep -q "recovering from" "$dir/log" && { echo "run_degraded: a recovery happened"; exit 1; }
n=$(grep -c "HEAL rank .*recoveries 0 epoch 0" "$dir/log")
[ "$n" = 4 ] || { echo "run_degraded: $n of 4 ranks finished without a recovery"; exit 1; }
if [ -z "$pattern" ]; then
  if grep -q "is DEGRADED\|at most [1-9] rank(s) DEGRADED" "$dir/log"; then
    echo "run_degraded: a rank was DEGRADED without a fault"
    exit 1
  fi
  echo "run_degraded: no rank DEGRADED without a fault"
  exit 0
fi
grep -q -- "$pattern" "$dir/log" || { echo "run_degraded: nobody reported '$pattern'"; exit 1; }
grep -q "at most [1-9] rank(s) DEGRADED" "$dir/log" || { echo "run_degraded: no rank counted a DEGRADED peer"; exit 1; }
echo "run_degraded: '$spec': reported '$pattern', no recovery"
