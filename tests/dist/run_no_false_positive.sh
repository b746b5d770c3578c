#!/usr/bin/env bash
# No false positive under load (SPEC H3, issue 9): a 4-rank heal_worker job
# (heartbeat 100 ms, dead after 400 ms) runs its steps slowly while as many
# busy-looping processes as there are CPUs keep every core saturated; no
# rank may be declared unreachable: every rank finishes with 0 recoveries.
# bench/no_false_positive.sh is the long version.
#   usage: run_no_false_positive.sh SGRT WORKER DIR [STEP_SLEEP_MS]
set -u
sgrt=$1 worker=$2 dir=$3 pause=${4:-500}
rm -rf "$dir" && mkdir -p "$dir" || exit 1
hogs=()
cleanup() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2> /dev/null; }
trap cleanup EXIT
for ((i = 0; i < $(nproc); i++)); do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
HEAL_STEP_SLEEP_MS=$pause "$sgrt" launch --label --heal -n 4 -- "$worker" "$dir" > "$dir/log" 2>&1
rc=$?
cleanup
hogs=()
cat "$dir/log"
[ "$rc" = 0 ] || { echo "run_no_false_positive: the job failed ($rc)"; exit 1; }
n=$(grep -c "HEAL rank .*recoveries 0 " "$dir/log")
[ "$n" = 4 ] || { echo "run_no_false_positive: $n of 4 ranks finished without a recovery"; exit 1; }
echo "run_no_false_positive: 4 ranks, $(nproc) CPU hogs, no rank declared unreachable"
