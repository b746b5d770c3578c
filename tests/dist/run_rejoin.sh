#!/usr/bin/env bash
# Rejoin (docs/resilience.md "Rejoin"): a failure-free 4-rank run of
# heal_worker, then the same job under `sgrt launch --heal --restart-failed K
# --inject SPEC`: the killed rank is restarted with SG_REJOIN=1, admitted by
# the running ranks at a step boundary and sent their state. Passes when the
# job finishes every step with all 4 ranks, each rank's parameters match the
# failure-free run within 1e-5 relative (heal_worker checks) and are bitwise
# equal across the ranks, the launcher restarted the rank K times, the last
# incarnation joined at epoch EPOCH, and the other ranks took part in
# MEMBER_REJOINS admissions. With FINAL=3 the last incarnation dies after
# its admission (a fault at its admission step): the other 3 ranks must heal
# again and finish, equal to each other and to the failure-free run.
# With MODE=kill-joiner (steps paced at 400 ms) this script SIGKILLs the
# restarted rank once the members have decided to admit it, before they
# reach the admission step: the members must abandon the admission (their
# new communicator cannot be built; run it with a short SG_COMM_TIMEOUT_MS)
# and finish on their own (FINAL=3, MEMBER_REJOINS=0).
#   usage: run_rejoin.sh SGRT WORKER DIR SPEC K JOINER EPOCH MEMBER_REJOINS [FINAL [MODE]]
set -u
sgrt=$1 worker=$2 dir=$3 spec=$4 restarts=$5 joiner=$6 epoch=$7 member_rejoins=$8 final=${9:-4} mode=${10:-}
export HEAL_STEPS=${HEAL_STEPS:-12}
# Steps paced at 150 ms: the restarted process (start, graph, store) has time
# to ask before the survivors run out of steps.
export HEAL_STEP_SLEEP_MS=150
[ "$mode" = kill-joiner ] && export HEAL_STEP_SLEEP_MS=400
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/run" || exit 1
"$sgrt" launch --label -n 4 -- "$worker" "$dir/ref" > "$dir/ref.log" 2>&1 || {
  cat "$dir/ref.log"
  echo "run_rejoin: the failure-free run failed"
  exit 1
}
t0=$(date +%s.%N)
"$sgrt" launch --label --heal --restart-failed "$restarts" --inject "$spec" -n 4 -- "$worker" "$dir/run" "$dir/ref" \
  > "$dir/log" 2>&1 &
job=$!
if [ "$mode" = kill-joiner ]; then
  for ((i = 0; i < 2000; i++)); do
    grep -q "asked to rejoin: admission" "$dir/log" && break
    sleep 0.01
  done
  # The joiner is the worker whose environment has SG_REJOIN=1 (the launcher's has not).
  for p in $(pgrep -f -- "$worker $dir/run"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "SG_REJOIN=1"; then
      kill -9 "$p" && echo "run_rejoin: killed the joiner (pid $p) after the admission decision" >> "$dir/killed"
    fi
  done
fi
wait $job
rc=$?
t1=$(date +%s.%N)
cat "$dir/log"
fail() {
  echo "run_rejoin: '$spec': $*"
  exit 1
}
[ "$rc" = 0 ] || fail "the job failed ($rc)"
n=$(grep -c "HEAL rank [0-9] (now [0-9] of $final)" "$dir/log")
[ "$n" = "$final" ] || fail "$n ranks finished with $final members, expected $final"
k=$(grep -c "sgrt launch: restarting rank $joiner " "$dir/log")
[ "$k" = "$restarts" ] || fail "rank $joiner was restarted $k times, expected $restarts"
if [ "$mode" = kill-joiner ]; then
  cat "$dir/killed" 2> /dev/null || fail "no joiner to kill"
  grep -q "rank $joiner: rejoined the job" "$dir/log" && fail "the joiner was admitted before it was killed"
  a=$(grep -c "rejoin: admission 0 at step [0-9]* abandoned" "$dir/log")
  [ "$a" = 3 ] || fail "$a members abandoned the admission, expected 3"
else
  grep -q "rank $joiner: rejoined the job: .* epoch $epoch," "$dir/log" ||
    fail "rank $joiner did not rejoin at epoch $epoch"
fi
if [ "$final" = 4 ]; then
  grep -Eq "HEAL rank $joiner \(now $joiner of 4\): recoveries 0 epoch $epoch .* rejoins 1( |\$)" "$dir/log" ||
    fail "rank $joiner did not finish as a rank rejoined at epoch $epoch"
  first=$joiner
else
  first=$(( joiner == 0 ? 1 : 0 ))
fi
for r in 0 1 2 3; do
  [ "$r" = "$joiner" ] && continue
  grep -Eq "HEAL rank $r \(now [0-9] of $final\): .* rejoins $member_rejoins( |\$)" "$dir/log" ||
    fail "rank $r did not take part in $member_rejoins admissions"
  cmp -s "$dir/run/params.$r" "$dir/run/params.$first" || fail "the parameters of ranks $r and $first differ"
done
worst=$(grep -o "max_rel [0-9.e+-]*" "$dir/log" | awk '{ if ($2 > m) m = $2 } END { printf "%.3g", m }')
waited=$(grep -o "admitted at step [0-9]* after [0-9.]* ms" "$dir/log" | tr '\n' ';')
if [ "$mode" = kill-joiner ]; then
  what="rank $joiner was killed while being admitted, the members abandoned the admission"
else
  what="rank $joiner rejoined (epoch $epoch)"
fi
printf "run_rejoin: '%s': %s, %s ranks finished %s steps, bitwise equal, worst relative\n" "$spec" "$what" \
  "$final" "$HEAL_STEPS"
printf "run_rejoin: difference from the failure-free run %s; %s job %.1f s\n" "$worst" "$waited" \
  "$(echo "$t1 - $t0" | bc)"
