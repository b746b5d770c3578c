#!/usr/bin/env bash
# A self-healing test (docs/resilience.md): a failure-free 4-rank run of
# heal_worker, then the same job with a fault injected by `sgrt launch
# --inject SPEC`; the launcher's status is 0 only when a majority of ranks
# finished, and every survivor checked its parameters against the
# failure-free run (1e-5 relative), RPO 0 and detection < 1 s. A device
# fault's rank leaves with status 1, the launcher's status then.
# With "cont" (a stop fault, steps paced at 300 ms), the stopped rank is
# continued (SIGCONT) while the others still run: it must find itself
# excluded and exit 75 on its own. HEAL_EXPECT=PATTERN: the log must
# contain it (how the failure was detected).
#   usage: run_heal.sh SGRT WORKER DIR SPEC [SEED [cont]]
set -u
sgrt=$1 worker=$2 dir=$3 spec=$4 seed=${5:-0} cont=${6:-}
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/run" || exit 1
"$sgrt" launch --label -n 4 -- "$worker" "$dir/ref" || { echo "run_heal: the failure-free run failed"; exit 1; }
[ -n "$cont" ] && export HEAL_STEP_SLEEP_MS=300
SG_INJECT_SEED=$seed "$sgrt" launch --label --inject "$spec" -n 4 -- "$worker" "$dir/run" "$dir/ref" > "$dir/log" 2>&1 &
job=$!
if [ -n "$cont" ]; then
  # Find the stopped rank (state T) among this job's workers, within 10 s, and continue it.
  for ((i = 0; i < 100; i++)); do
    stopped=""
    for p in $(pgrep -f -- "$worker $dir/run"); do
      [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = T ] && stopped=$p
    done
    [ -n "$stopped" ] && break
    sleep 0.1
  done
  [ -n "$stopped" ] || { echo "run_heal: no rank was stopped"; kill "$job"; exit 1; }
  sleep 1 # the others detect it and recover meanwhile
  kill -CONT "$stopped"
fi
wait $job
rc=$?
cat "$dir/log"
# A device fault: the failed rank reports its lost device and exits 1 (SPEC H6), so the launcher's
# status is 1; the other three must have finished.
if [ "$rc" = 1 ] && [ "${spec%%:*}" = device ] && grep -q "the device failed earlier: .*injected device failure" "$dir/log" &&
  grep -q "3 of 4 ranks finished the job" "$dir/log"; then
  rc=0
fi
[ "$rc" = 0 ] || { echo "run_heal: the job with '$spec' failed ($rc)"; exit 1; }
n=$(grep -c "HEAL rank .*recoveries [1-9]" "$dir/log")
[ "$n" -ge 3 ] || { echo "run_heal: $n ranks recovered, expected at least 3"; exit 1; }
if [ -n "$cont" ] && ! grep -q "exited with status 75 (excluded" "$dir/log"; then
  echo "run_heal: the continued rank did not leave as excluded"
  exit 1
fi
# HEAL_EXPECT: a pattern the survivors' reports must contain (how the failure was found).
if [ -n "${HEAL_EXPECT:-}" ] && ! grep -q -- "$HEAL_EXPECT" "$dir/log"; then
  echo "run_heal: no survivor reported '$HEAL_EXPECT'"
  exit 1
fi
echo "run_heal: '$spec': $n survivors recovered and match the failure-free run"
