# shellcheck shell=bash disable=SC2154  # bench, json, quiet: set by the sourcing script
# Shared by the benchmarks: those of resnet50_dist under the launcher
# (bench/dist_scaling.sh, bench/replication_cost.sh) use all of it; those
# against PyTorch (bench/resnet50_vs_torch.sh, bench/fusion.sh) use the part
# from bench_progress on. Source it after `set -euo pipefail` with `bench` set
# to the script's name (it starts every error message); then set the script's
# own defaults and parse its options:
#
#   while [ $# -gt 0 ]; do
#     case $1 in
#       --ranks) ranks=$2; shift 2 ;;   # the script's own options
#       *) bench_option "$@"; shift "$bench_shift" ;;
#     esac
#   done
#   bench_start
#
# Sets repo, build (default $repo/build) and py; bench_option sets build,
# steps, batch, res, width, repeat and json; bench_start sets bin and sgrt.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
py=/usr/bin/python3

# The options every such benchmark takes; bench_shift: how many words $1 took.
# -h prints the script's header (lines 2-16); an unknown option ends the script.
# shellcheck disable=SC2034  # the variables are the sourcing script's
bench_option() {
  bench_shift=2
  case $1 in
    --build) build=$(cd "$2" && pwd) ;;
    --steps) steps=$2 ;;
    --batch) batch=$2 ;;
    --res) res=$2 ;;
    --width) width=$2 ;;
    --repeat) repeat=$2 ;;
    --json) json=1; bench_shift=1 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "$bench: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
}

# After the options: the example and the launcher must be built, and progress
# goes to fd 3: stdout, or stderr with --json (so the JSON is the last line of
# stdout).
bench_start() {
  bin=$build/examples/resnet50_dist
  sgrt=$build/tools/sgrt
  local f
  for f in "$bin" "$sgrt"; do
    [ -x "$f" ] || { echo "$bench: no $f; build first (cmake --build $build)" >&2; exit 1; }
  done
  bench_progress
}

# Progress goes to fd 3: stdout, or stderr with --json (json=1).
bench_progress() {
  if [ "$json" = 1 ]; then exec 3>&2; else exec 3>&1; fi
}

say() { echo "$*" >&3; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# Waits until the 1-minute load average is below $quiet (0: no wait), at most
# 10 minutes (--quiet-load X).
wait_quiet() {
  [ "$quiet" = 0 ] && return 0
  local waited=0
  while "$py" -c 'import sys; sys.exit(float(sys.argv[1]) < float(sys.argv[2]))' "$(load1)" "$quiet" && [ $waited -lt 600 ]; do
    sleep 10
    waited=$((waited + 10))
  done
}

# The PyTorch peer of ResNet-50's training step (../shared/bench, beside the
# repo): torchvision's resnet50, SGD lr 0.01 momentum 0.9, median ms per step
# after one warm-up step. torch_resnet50 PYTHON RES BATCH STEPS THREADS LAYOUT
# prints its JSON line (nothing if it failed; its stderr is dropped).
torch_resnet50_peer=$repo/../shared/bench/torch_resnet50_step.py
torch_resnet50_check() {
  [ -f "$torch_resnet50_peer" ] || { echo "$bench: no peer script at $torch_resnet50_peer (the shared folder beside the repo)" >&2; exit 1; }
}
torch_resnet50() {
  local python=$1
  shift
  "$python" "$torch_resnet50_peer" "$@" 2> /dev/null | tail -n 1
}

# Runs `sgrt launch -n N -- resnet50_dist ARGS...` (said first, with the load
# average) and sets bench_json to rank 0's --json line (the last line of the
# job's standard output: only rank 0 prints one); without one the script ends.
bench_launch() {
  local n=$1 cmd
  shift
  cmd="$sgrt launch -n $n -- $bin $*"
  say "\$ $cmd    # load average $(load1)"
  bench_json=$($cmd 2>/dev/null | tail -n 1 | grep '^{')
  [ -n "$bench_json" ] || { echo "$bench: no JSON from: $cmd" >&2; exit 1; }
}

# The values of the keys of bench_json, on one line.
bench_fields() {
  echo "$bench_json" | "$py" -c 'import json, sys; r = json.loads(sys.stdin.read()); print(*(r[k] for k in sys.argv[1:]))' "$@"
}

best() { "$py" -c 'import sys; print(max(float(a) for a in sys.argv[1:]))' "$@"; }
least() { "$py" -c 'import sys; print(min(float(a) for a in sys.argv[1:]))' "$@"; }
