#!/usr/bin/env bash
# Data-parallel scaling on this machine (docs/dist.md): resnet50_dist with 2
# ranks x 1 compute thread against 1 rank x 1 compute thread at the same
# per-rank batch (weak scaling, as DDP is used), and the ratio of their
# throughputs (images/s of the whole job). Perfect scaling is 2.0; the target
# is >= 1.8. Not a timed test: these machines are shared, so each run records
# the 1-minute load average before it, and --repeat N keeps each side's best
# of N runs (a run can only be slowed down by other work).
#
#   bench/dist_scaling.sh [--build DIR] [--steps N] [--batch N] [--res N] [--width N]
#                         [--repeat N] [--json]
#
# The wall-time ratio needs two idle cores per pair of ranks. On a shared
# machine it also reports the CPU-time view, which other jobs do not skew:
# each rank's process CPU time per step (compute and communication threads),
# and cpu_ratio = 2 x (CPU per step of 1 rank) / (CPU per step of a rank of 2),
# the ratio the 2 ranks would reach with a core each and no waiting.
#
# Prints each command and its result; with --json the last line is one JSON
# object: ranks, images_per_s_1, images_per_s_2, ratio, cpu_ratio, target,
# load averages.
set -euo pipefail

bench=dist_scaling
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
steps=6
batch=16
res=64
width=64
repeat=1
json=0
while [ $# -gt 0 ]; do
  bench_option "$@"
  shift "$bench_shift"
done
bench_start
# images_per_s and cpu_ms_per_step of one run of N ranks (rank 0's JSON line).
run() {
  bench_launch "$1" --steps "$steps" --batch "$batch" --res "$res" --width "$width" --threads 1 --warmup 1 --json
  say "  $bench_json"
  bench_fields images_per_s cpu_ms_per_step
}

load_before=$(load1)
ips1=() ips2=() cpu1=() cpu2=()
for ((i = 0; i < repeat; i++)); do
  read -r a b <<<"$(run 1)"
  ips1+=("$a") cpu1+=("$b")
  read -r a b <<<"$(run 2)"
  ips2+=("$a") cpu2+=("$b")
done
load_after=$(load1)
one=$(best "${ips1[@]}")
two=$(best "${ips2[@]}")
c1=$(least "${cpu1[@]}")
c2=$(least "${cpu2[@]}")
ratio=$("$py" -c 'import sys; print("%.3f" % (float(sys.argv[2]) / float(sys.argv[1])))' "$one" "$two")
cpu_ratio=$("$py" -c 'import sys; print("%.3f" % (2 * float(sys.argv[1]) / float(sys.argv[2])))' "$c1" "$c2")
say "resnet50_dist ${res}x${res}, width $width, batch $batch per rank, $steps steps (1 warm-up), best of $repeat:"
say "  1 rank  x 1 thread: $one images/s, $c1 ms CPU per step"
say "  2 ranks x 1 thread: $two images/s, $c2 ms CPU per step and rank"
say "  scaling ratio $ratio (target >= 1.8); CPU-time ratio $cpu_ratio; load average $load_before before,"
say "  $load_after after, $(nproc) CPUs"
if [ "$json" = 1 ]; then
  "$py" -c 'import json, sys
a = sys.argv[1:]
print(json.dumps({"bench": "dist_scaling", "model": "resnet50", "res": int(a[0]), "width": int(a[1]),
                  "batch_per_rank": int(a[2]), "steps": int(a[3]), "repeat": int(a[4]), "ranks": 2,
                  "images_per_s_1": float(a[5]), "images_per_s_2": float(a[6]), "ratio": float(a[7]),
                  "cpu_ms_per_step_1": float(a[8]), "cpu_ms_per_step_2": float(a[9]), "cpu_ratio": float(a[10]),
                  "target": 1.8, "load1_before": float(a[11]), "load1_after": float(a[12]), "cpus": int(a[13])}))' \
    "$res" "$width" "$batch" "$steps" "$repeat" "$one" "$two" "$ratio" "$c1" "$c2" "$cpu_ratio" "$load_before" \
    "$load_after" "$(nproc)"
fi
