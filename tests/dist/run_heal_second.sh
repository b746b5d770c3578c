#!/usr/bin/env bash
# More than one failure in one job (issue 15): a failure-free run of
# heal_worker on N ranks, then the same job with SPEC injected, typically a
# kill at a step and a second kill in a phase of the recovery that follows
# (kill:rank=R,recovery=detect|agree|build|transfer), or two kills at two
# steps. EXPECT is
#   heal      the launcher exits 0, its last line names the lost ranks, at
#             least N-2 survivors recovered and match the failure-free run
#             (heal_worker: 1e-5 relative, RPO 0)
#   minority  every survivor stops with "not a strict majority" and the
#             launcher fails
# and either way within 30 s, far from the 60 s communication timeout set
# here, which a recovery waiting for a dead member would run out.
#   usage: run_heal_second.sh SGRT WORKER DIR N SPEC heal|minority
set -u
sgrt=$1 worker=$2 dir=$3 n=$4 spec=$5 expect=$6
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/run" || exit 1
"$sgrt" launch --label -n "$n" -- "$worker" "$dir/ref" > "$dir/ref.log" 2>&1 || {
  cat "$dir/ref.log"
  echo "run_heal_second: the failure-free run failed"
  exit 1
}
t0=$(date +%s)
SG_COMM_TIMEOUT_MS=60000 timeout 120 "$sgrt" launch --label --inject "$spec" -n "$n" -- "$worker" "$dir/run" "$dir/ref" \
  > "$dir/log" 2>&1
rc=$?
took=$(($(date +%s) - t0))
grep -v "health log" "$dir/log"
[ "$took" -le 30 ] || { echo "run_heal_second: the job took ${took} s (a wait ran out?)"; exit 1; }
if [ "$expect" = minority ]; then
  [ "$rc" != 0 ] || { echo "run_heal_second: the launcher exited 0 for a minority"; exit 1; }
  k=$(grep -c "not a strict majority: stopping" "$dir/log")
  [ "$k" -ge 1 ] || { echo "run_heal_second: no survivor stopped for want of a majority"; exit 1; }
  echo "run_heal_second: '$spec': $k survivors stopped, not a majority, in ${took} s"
  exit 0
fi
[ "$rc" = 0 ] || { echo "run_heal_second: the launcher exited $rc"; exit 1; }
k=$(grep -c "HEAL rank .*recoveries [1-9]" "$dir/log")
[ "$k" -ge $((n - 2)) ] || { echo "run_heal_second: $k ranks recovered, expected $((n - 2))"; exit 1; }
tail -n 1 "$dir/log" | grep -q "the job finished on $((n - 2)) of $n ranks: ranks .* lost" || {
  echo "run_heal_second: the launcher's last line does not name the lost ranks"
  exit 1
}
echo "run_heal_second: '$spec': $k survivors recovered and match the failure-free run, in ${took} s"
