#!/usr/bin/env bash
# No false positive under load (SPEC H3, issue 9), the long version of the
# test dist_heal_no_false_positive_np4: resnet50_dist on 4 local ranks (the
# failure detector's defaults, heartbeat 100 ms and dead after 600 ms, unless
# --heartbeat-ms/--dead-ms say otherwise) trains for about MINUTES minutes
# while as many busy-looping processes as there are CPUs saturate every
# core; then checks that no recovery happened (a recovery would mean a live
# rank was declared unreachable). Not a test: it takes minutes.
#
#   bench/no_false_positive.sh [--build DIR] [--minutes M] [--heartbeat-ms N] [--dead-ms N] [--json]
#
# With --json the last line is one JSON object: minutes, steps, hogs,
# heartbeat_ms and dead_ms (null: the defaults),
# recoveries, ok.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
minutes=10
json=0 hb= dead=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --json) json=1; shift ;;
    --heartbeat-ms) hb=$2; shift 2 ;;
    --dead-ms) dead=$2; shift 2 ;;
    -h | --help) sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "no_false_positive: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $minutes =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "no_false_positive: --minutes needs a number" >&2; exit 2; }
sgrt=$build/tools/sgrt bin=$build/examples/resnet50_dist
[ -x "$sgrt" ] && [ -x "$bin" ] || { echo "no_false_positive: build $build first" >&2; exit 1; }
args=(--width 16 --res 32 --batch 8 --lr 0.01 --threads 1)
[ -n "$hb" ] && args+=(--heartbeat-ms "$hb")
[ -n "$dead" ] && args+=(--dead-ms "$dead")
hogs=()
cleanup() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2> /dev/null; }
trap cleanup EXIT
for ((i = 0; i < $(nproc); i++)); do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
# Step time under this load, from a short run, sets the number of steps.
probe=$("$sgrt" launch --label -n 4 -- "$bin" "${args[@]}" --steps 6 --json 2>/dev/null | sed -n 's/^\[0\] \({.*}\)$/\1/p' | tail -n 1)
ms=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ms_per_step"])' "$probe" 2>/dev/null) ||
  { echo "no_false_positive: the probe run failed" >&2; exit 1; }
steps=$(/usr/bin/python3 -c "import sys; print(max(10, int($minutes * 60000 / float(sys.argv[1]))))" "$ms")
echo "no_false_positive: $(nproc) CPU hogs; ${ms} ms per step under load; $steps steps (~$minutes min)" >&2
out=$("$sgrt" launch --label --heal -n 4 -- "$bin" "${args[@]}" --steps "$steps" --json 2>&1)
rc=$?
cleanup
hogs=()
summary=$(sed -n 's/^\[0\] \({.*}\)$/\1/p' <<<"$out" | tail -n 1)
rec=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["recoveries"])' "$summary" 2>/dev/null || echo -1)
ok=false
[ "$rc" = 0 ] && [ "$rec" = 0 ] && ok=true
echo "no_false_positive: $steps steps in ~$minutes min with every core saturated: recoveries $rec, job status $rc" >&2
[ "$json" = 1 ] && printf '{"minutes":%s,"steps":%s,"hogs":%s,"heartbeat_ms":%s,"dead_ms":%s,"recoveries":%s,"ok":%s}\n' \
  "$minutes" "$steps" "$(nproc)" "${hb:-null}" "${dead:-null}" "$rec" "$ok"
[ "$ok" = true ]
