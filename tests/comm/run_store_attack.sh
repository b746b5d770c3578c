#!/usr/bin/env bash
# The rendezvous store under attack during a job (issue 15): a failure-free
# 4-rank run of heal_worker, then the same job with rank 0 wrapped in
# store_attack_tool (every hostile client of store_attacks.c, round after
# round, against the launcher's store for the whole job) and rank 2 killed at
# step 5. The job must heal through the attacked store: the launcher exits 0,
# every survivor recovered and matches the failure-free run (heal_worker),
# and the store cut off every drip, closed the idle and half-open connections
# and refused every hostile frame.
#   usage: run_store_attack.sh SGRT TOOL WORKER DIR
set -u
sgrt=$1 tool=$2 worker=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/run" || exit 1
"$sgrt" launch --label -n 4 -- "$worker" "$dir/ref" > "$dir/ref.log" 2>&1 || {
  cat "$dir/ref.log"
  echo "run_store_attack: the failure-free run failed"
  exit 1
}
# Steps paced at 400 ms: the job lasts several of the store's 2 s
# authentication windows, so every attack plays more than once.
HEAL_STEP_SLEEP_MS=400 timeout 300 "$sgrt" launch --label --inject "kill:rank=2,step=5" -n 4 -- \
  "$tool" "$worker" "$dir/run" "$dir/ref" > "$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ "$rc" = 0 ] || { echo "run_store_attack: the launcher exited $rc"; exit 1; }
n=$(grep -c "HEAL rank .*recoveries [1-9]" "$dir/log")
[ "$n" -ge 3 ] || { echo "run_store_attack: $n ranks recovered, expected 3"; exit 1; }
line=$(grep -o "store_attack: .*" "$dir/log" | tail -n 1)
[ -n "$line" ] || { echo "run_store_attack: no report from the attacker"; exit 1; }
# A hostile frame the store dropped unanswered (the oldest connection waiting to authenticate, pushed
# out by the flood of idle ones) is a defence too; only a reply other than a refusal, or a
# connection the store kept, counts as "answered otherwise".
read -r drips cut idle refused other half dropped < <(sed -E 's/[^0-9]+/ /g' <<<"$line")
if [ "$drips" -lt 1 ] || [ "$cut" -lt 1 ] || [ "$idle" -lt 100 ] || [ "$refused" -lt 4 ] || [ "$other" != 0 ] ||
  [ "$half" -lt 1 ]; then
  echo "run_store_attack: the store did not fend off every attack: $line"
  exit 1
fi
echo "run_store_attack: the job healed through the attacked store ($line)"
