#!/usr/bin/env bash
# sgrt's ResNet-50 training step against PyTorch's, side by side in one run
# (SPEC C2; docs/performance.md).
#
#   bench/resnet50_vs_torch.sh [--build DIR] [--steps N] [--threads N] [--repeat N]
#                              [--quiet-load X] [--configs "224x8 64x16"] [--json]
#
# For each RESxBATCH config it runs, with the same thread count, batch,
# resolution, 1000 classes and SGD (lr 0.01, momentum 0.9):
#   - sgrt:    build/examples/resnet50_train --json (median ms/step over N
#              steps after one warm-up step);
#   - PyTorch: ../shared/bench/torch_resnet50_step.py (the peer baseline:
#              torchvision's resnet50, median over N steps after one warm-up),
#              in both layouts, channels_last (cl) and nchw; the faster counts;
# and prints images/s and peak RSS of both and their ratios (sgrt / PyTorch:
# > 1 is faster for images/s, < 1 is leaner for RSS). With --repeat N the
# three runs of a config alternate N times and each side keeps its fastest
# median (best of N: on a shared machine a run can only be slowed down).
# --quiet-load X waits (up to 10 minutes) before each run until the 1-minute
# load average is below X. With --json the last line is one JSON object. Not
# a timed test: these machines are shared, so compare only ratios measured in
# one run (the load average before each run is recorded).
set -euo pipefail

bench=resnet50_vs_torch
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
steps=5
threads=2
repeat=1
quiet=0
configs="224x8 64x16"
json=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --quiet-load) quiet=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "resnet50_vs_torch: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
sgrt_bin=$build/examples/resnet50_train
[ -x "$sgrt_bin" ] || { echo "resnet50_vs_torch: no $sgrt_bin; build first (cmake --build $build)" >&2; exit 1; }
torch_resnet50_check
bench_progress
results=()
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $threads threads, $steps timed steps after 1 warm-up, best of $repeat"
for cfg in $configs; do
  res=${cfg%x*}
  batch=${cfg#*x}
  say "== ${res}x${res}, batch $batch"
  runs=()
  for ((r = 0; r < repeat; r++)); do
    wait_quiet
    say "load average: $(load1)"
    sg=$("$sgrt_bin" --res "$res" --batch "$batch" --classes 1000 --steps $((steps + 1)) --warmup 1 --lr 0.01 \
      --threads "$threads" --json | tail -n 1)
    say "sgrt:          $sg"
    wait_quiet
    say "load average: $(load1)"
    cl=$(torch_resnet50 "$py" "$res" "$batch" "$steps" "$threads" cl)
    say "pytorch cl:    $cl"
    wait_quiet
    say "load average: $(load1)"
    nchw=$(torch_resnet50 "$py" "$res" "$batch" "$steps" "$threads" nchw)
    say "pytorch nchw:  $nchw"
    runs+=("$sg" "$cl" "$nchw")
  done
  results+=("$("$py" - "$res" "$batch" "${runs[@]}" <<'EOF'
import json, sys
res, batch = int(sys.argv[1]), int(sys.argv[2])
runs = [json.loads(a) for a in sys.argv[3:]]
best = lambda rs, key: min(rs, key=lambda r: r[key])
sg = best(runs[0::3], "ms_per_step")
cl, nchw = best(runs[1::3], "ms_per_step"), best(runs[2::3], "ms_per_step")
pt = min((cl, nchw), key=lambda r: r["ms_per_step"])
print(json.dumps({
    "res": res, "batch": batch,
    "sgrt_ms_per_step": round(sg["ms_per_step"], 2), "sgrt_images_per_s": round(sg["images_per_second"], 3),
    "sgrt_peak_rss_mb": sg["peak_rss_mb"],
    "torch_layout": pt["layout"], "torch_ms_per_step": pt["ms_per_step"], "torch_images_per_s": pt["images_per_s"],
    "torch_peak_rss_mb": pt["peak_rss_mb"],
    "torch_cl_ms_per_step": cl["ms_per_step"], "torch_nchw_ms_per_step": nchw["ms_per_step"],
    "speed_ratio": round(sg["images_per_second"] / pt["images_per_s"], 3),
    "rss_ratio": round(sg["peak_rss_mb"] / pt["peak_rss_mb"], 3), "runs": len(runs) // 3}))
EOF
)")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
"$py" - "$json" "$threads" "$steps" "$load_after" "${results[@]}" <<'EOF'
import json, sys
as_json, threads, steps, load = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [json.loads(a) for a in sys.argv[5:]]
out = sys.stderr if as_json else sys.stdout
print("load average after: %s" % load, file=out)
hdr = ("config", "sgrt img/s", "torch img/s", "speed ratio", "sgrt RSS MB", "torch RSS MB", "RSS ratio")
print("| " + " | ".join(hdr) + " |", file=out)
print("|" + "|".join("---" for _ in hdr) + "|", file=out)
for r in rows:
    print("| %dx%d, batch %d | %.2f | %.2f (%s) | %.2fx | %d | %d | %.2fx |" % (
        r["res"], r["res"], r["batch"], r["sgrt_images_per_s"], r["torch_images_per_s"], r["torch_layout"],
        r["speed_ratio"], r["sgrt_peak_rss_mb"], r["torch_peak_rss_mb"], r["rss_ratio"]), file=out)
if as_json:
    print(json.dumps({"bench": "resnet50_vs_torch", "threads": threads, "steps": steps, "load_after": load,
                      "configs": rows}))
EOF
