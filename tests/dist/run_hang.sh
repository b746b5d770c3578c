#!/usr/bin/env bash
# Hang diagnosis (SPEC H7, docs/resilience.md "Hang diagnosis"): 4 ranks of
# hang_worker, the compute thread of one rank stuck at a step
# ("hang:rank=R,step=S" in SG_INJECT) while its scheduler thread keeps
# heartbeating, hang timeout HANG_MS (2000 ms).
#   fail: no healing (plain `sgrt launch`): every other rank fails within
#         HANG_MS + 1 s of the hang with a message naming the stuck rank, the
#         collective it did not enter (the step's first gradient bucket) and
#         its last position; the launcher exits non-zero.
#   heal: a failure-free run, then `sgrt launch --inject`: the 3 others
#         complete every step with the failure-free run's parameters (1e-5
#         relative), the stuck rank leaves with status 75 (excluded), and
#         the detection time is reported.
#   usage: run_hang.sh SGRT WORKER DIR fail|heal SPEC [SEED]
set -u
sgrt=$1 worker=$2 dir=$3 mode=$4 spec=$5 seed=${6:-0}
hang_ms=${HANG_MS:-2000}
export HANG_MS=$hang_ms
rm -rf "$dir" && mkdir -p "$dir/ref" "$dir/run" || exit 1
stuck=$(sed -n 's/.*hang:rank=\([0-9]*\).*/\1/p' <<< "$spec")
[ -n "$stuck" ] || { echo "run_hang: no hang:rank=R in '$spec'"; exit 1; }

if [ "$mode" = fail ]; then
  SG_INJECT=$spec SG_INJECT_SEED=$seed "$sgrt" launch --label -n 4 -- "$worker" fail "$dir/run" > "$dir/log" 2>&1
  rc=$?
  cat "$dir/log"
  [ "$rc" != 0 ] || { echo "run_hang: the launcher exited 0 although rank $stuck hung"; exit 1; }
  line=$(grep "rank $stuck: the compute thread hangs at the start of step" "$dir/log")
  step=$(sed -n 's/.*at the start of step \([0-9]*\) (wall clock \([0-9.]*\) s).*/\1/p' <<< "$line")
  t0=$(sed -n 's/.*at the start of step \([0-9]*\) (wall clock \([0-9.]*\) s).*/\2/p' <<< "$line")
  [ -n "$step" ] && [ -n "$t0" ] || { echo "run_hang: rank $stuck did not hang"; exit 1; }
  worst=0
  for r in 0 1 2 3; do
    [ "$r" = "$stuck" ] && continue
    msg=$(grep "HANGFAIL rank $r wall" "$dir/log")
    [ -n "$msg" ] || { echo "run_hang: rank $r did not report a failure"; exit 1; }
    for want in "rank $stuck is stuck before collective #" \
      "(step $((step + 1)): allreduce of gradient bucket 1 of " "its last: #" "hang timeout $hang_ms ms"; do
      grep -qF -- "$want" <<< "$msg" || { echo "run_hang: rank $r's message lacks '$want'"; exit 1; }
    done
    t=$(sed -n 's/.*HANGFAIL rank [0-9]* wall \([0-9.]*\):.*/\1/p' <<< "$msg")
    dt=$(awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')
    awk -v dt="$dt" -v lim="$hang_ms" 'BEGIN { exit !(dt * 1000 <= lim + 1000) }' ||
      { echo "run_hang: rank $r failed $dt s after the hang (limit $hang_ms ms + 1 s)"; exit 1; }
    awk -v dt="$dt" -v w="$worst" 'BEGIN { exit !(dt > w) }' && worst=$dt
  done
  echo "run_hang: rank $stuck hung at step $step; every other rank named it within $worst s (hang timeout $hang_ms ms)"
  exit 0
fi

[ "$mode" = heal ] || { echo "run_hang: unknown mode '$mode'"; exit 1; }
"$sgrt" launch --label -n 4 -- "$worker" heal "$dir/ref" > "$dir/ref.log" 2>&1 ||
  { cat "$dir/ref.log"; echo "run_hang: the failure-free run failed"; exit 1; }
SG_INJECT_SEED=$seed "$sgrt" launch --label --inject "$spec" -n 4 -- "$worker" heal "$dir/run" "$dir/ref" > "$dir/log" 2>&1
rc=$?
cat "$dir/log"
[ "$rc" = 0 ] || { echo "run_hang: the job with '$spec' failed ($rc)"; exit 1; }
n=$(grep -c "HANG rank .*steps 10 recoveries [1-9]" "$dir/log")
[ "$n" = 3 ] || { echo "run_hang: $n ranks completed all steps after a recovery, expected 3"; exit 1; }
grep -q "rank $stuck exited with status 75 (excluded" "$dir/log" ||
  { echo "run_hang: the stuck rank $stuck did not leave as excluded (75)"; exit 1; }
grep -q "recovering from: .*rank $stuck is stuck before collective #" "$dir/log" ||
  { echo "run_hang: no survivor recovered from a diagnosed hang of rank $stuck"; exit 1; }
det=$(sed -n 's/.*recoveries [1-9].* detection_ms \([0-9.]*\).*/\1/p' "$dir/log" | sort -n | tail -1)
echo "run_hang: '$spec': 3 survivors match the failure-free run; detection $det ms (hang timeout $hang_ms ms)"
