#!/usr/bin/env bash
# detection_ms after a real failure (issue 15): 4 ranks of resnet50_dist
# with --heal; after step 5, rank 2 is stopped from outside (SIGSTOP: no
# injection tells the runtime when it failed and no closed connection gives it
# away; only its silence does; the launcher kills it at the end). Every output
# line is stamped on arrival (bash's EPOCHREALTIME). Rank 0's reported
# detection time must cover the time from the stop to its "recovering from"
# line, less the "detected N ms ago" the line gives (the compute thread starts
# the recovery at its next op, later on a loaded machine): the detection as an
# observer sees it. detection_ms counts from the last sign of life, which came
# before the stop, so it must cover that, less 60 ms of slack, and exceed it
# by at most 250 ms (a heartbeat period and scheduling). The slack: the line
# passes two pipes (the launcher's relay, then the stamping loop) before it is
# stamped, and rank 0 times its last heartbeat from rank 2 when it handles it,
# not when it arrived; each waits for a core on a loaded 2-core machine (35 ms
# were seen in CI, where the test now runs alone).
#   usage: run_detect.sh SGRT RESNET50_DIST
set -u
sgrt=$1 bin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
stamp() { while IFS= read -r line; do printf '%s %s\n' "${EPOCHREALTIME/./}" "$line"; done; }
args=(--steps 60 --res 32 --width 16 --batch 8 --threads 1 --heartbeat-ms 100 --dead-ms 400)
"$sgrt" launch --label -n 4 --heal -- "$bin" "${args[@]}" > >(stamp > "$dir/log") 2>&1 &
job=$!
for ((i = 0; i < 600; i++)); do
  grep -q "step 5/" "$dir/log" 2> /dev/null && break
  sleep 0.05
done
pid=""
for p in $(pgrep -f -- "$bin ${args[*]}"); do
  grep -qz '^SG_RANK=2$' "/proc/$p/environ" 2> /dev/null && pid=$p
done
[ -n "$pid" ] || { echo "run_detect: rank 2 not found"; kill "$job"; exit 1; }
trap 'kill -KILL "$pid" 2> /dev/null; rm -rf "$dir"' EXIT
t_stop=${EPOCHREALTIME/./}
kill -STOP "$pid"
wait "$job"
rc=$?
cut -d' ' -f2- "$dir/log" | grep -E "recover|done:"
[ "$rc" = 0 ] || { echo "run_detect: the job failed ($rc)"; exit 1; }
seen=$(awk -v k="$t_stop" '/^[0-9]+ \[0\] sgrt: rank 0: recovering from/ {
  ago = 0; if (match($0, /\(detected [0-9]+ ms ago\)/)) ago = substr($0, RSTART + 10, RLENGTH - 18)
  printf "%.1f", ($1 - k) / 1000 - ago; exit}' "$dir/log")
det=$(grep -o '\[recovered: .*detection [0-9]* ms' "$dir/log" | head -n 1 | sed -E 's/.*detection ([0-9]+) ms/\1/')
[ -n "$seen" ] && [ -n "$det" ] || { echo "run_detect: no recovery of rank 0 in the output"; exit 1; }
echo "run_detect: rank 0 detected the loss ${seen} ms after the stop; it reports detection_ms ${det}"
/usr/bin/python3 -c 'import sys
seen, det = float(sys.argv[1]), float(sys.argv[2])
sys.exit(0 if seen - 60 <= det <= seen + 250 else 1)' "$seen" "$det" || {
  echo "run_detect: detection_ms ${det} does not match the ${seen} ms observed"
  exit 1
}
