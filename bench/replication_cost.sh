#!/usr/bin/env bash
# What the in-memory replicas cost (issue 9: "replication costs <= 5% of step
# time"; docs/resilience.md "Replication cost"). resnet50_dist keeps, every
# step, a rollback replica of the committed parameters, state and optimizer
# state (its scheduler thread copies them while forward runs); with --no-heal
# it keeps none and a failure ends the job. This runs the same job both ways,
# alternating, and reports the step time each way (best of --repeat, as the
# machine is shared and a run can only be slowed down by other work) and the
# cost: 1 - (step time without) / (step time with), as a fraction. Not a
# timed test.
#
#   bench/replication_cost.sh [--build DIR] [--ranks N] [--steps N] [--batch N] [--res N] [--width N]
#                             [--threads N] [--repeat N] [--json]
#
# Defaults: 2 ranks x 1 thread, ResNet-50 at 64x64, width 64, batch 16, 6 steps
# (1 warm-up), best of 3. With --json the last line is one JSON object.
set -euo pipefail

bench=replication_cost
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ranks=2 steps=6 batch=16 res=64 width=64 threads=1 repeat=3 json=0
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) bench_option "$@"; shift "$bench_shift" ;;
  esac
done
bench_start
# ms_per_step and snapshot_ms_per_step of one job (rank 0's JSON line).
run() {
  bench_launch "$ranks" --steps "$steps" --batch "$batch" --res "$res" --width "$width" --threads "$threads" --warmup 1 --json "$@"
  bench_fields ms_per_step snapshot_ms_per_step snapshot_exposed_ms_per_step
}

load_before=$(load1)
with=() without=() snap=() exposed=()
for ((i = 0; i < repeat; i++)); do
  read -r a b c <<<"$(run)"
  with+=("$a") snap+=("$b") exposed+=("$c")
  say "  with replicas: $a ms/step (copy $b ms on the scheduler thread, $c ms not hidden)"
  read -r a b c <<<"$(run --no-heal)"
  without+=("$a")
  say "  without:       $a ms/step"
done
load_after=$(load1)
w=$(least "${with[@]}")
wo=$(least "${without[@]}")
s=$(least "${snap[@]}")
e=$(least "${exposed[@]}")
cost=$("$py" -c 'import sys; w, wo = float(sys.argv[1]), float(sys.argv[2]); print("%.4f" % ((w - wo) / w))' "$w" "$wo")
say "resnet50_dist ${res}x${res}, width $width, batch $batch, $ranks ranks x $threads thread(s), best of $repeat:"
say "  step with replicas $w ms, without $wo ms: cost $cost of the step (target <= 0.05);"
say "  the copy takes $s ms of scheduler time per step, $e ms of it exposed; load $load_before -> $load_after"
if [ "$json" = 1 ]; then
  "$py" -c 'import json, sys
a = sys.argv[1:]
print(json.dumps({"bench": "replication_cost", "model": "resnet50", "res": int(a[0]), "width": int(a[1]),
                  "batch_per_rank": int(a[2]), "ranks": int(a[3]), "threads": int(a[4]), "steps": int(a[5]),
                  "repeat": int(a[6]), "ms_per_step_with": float(a[7]), "ms_per_step_without": float(a[8]),
                  "cost_fraction": float(a[9]), "copy_ms_per_step": float(a[10]), "exposed_ms_per_step": float(a[11]),
                  "target": 0.05, "load1_before": float(a[12]), "load1_after": float(a[13]), "cpus": int(a[14])}))' \
    "$res" "$width" "$batch" "$ranks" "$threads" "$steps" "$repeat" "$w" "$wo" "$cost" "$s" "$e" \
    "$load_before" "$load_after" "$(nproc)"
fi
