#!/usr/bin/env bash
# The demo (SPEC I4): installs missing dependencies, builds sgrt, and trains
# ResNet-50 data-parallel on 4 local ranks on the CPU with `sgrt launch`:
# one progress line per step from rank 0 (step, loss, images/s, healthy
# ranks), a summary, and a Chrome trace of every rank's ops and allreduces.
# Halfway through, rank 2 is killed (SIGKILL, `--inject`): the other three
# detect it, agree on a new membership, roll back to the last committed step
# and go on with rank 2's share of every batch spread over them — no
# checkpoint, no lost step (docs/resilience.md).
#
# usage: scripts/demo.sh [-j N] [--steps N] [--no-fault] [--json]
#
# The model is torchvision's ResNet-50 layout at bottleneck width 16 (5.9 M
# parameters instead of 23.5 M) on 32x32 generated images, so that 40 steps
# finish in well under a minute on two cores. Its options are in
# scripts/demo.args; give build/examples/resnet50_dist others for the full
# width (--width 64) or other sizes.
set -euo pipefail

cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
steps=40
fault=1
json=()
usage="usage: scripts/demo.sh [-j N] [--steps N] [--no-fault] [--json]"
while [ $# -gt 0 ]; do
  case $1 in
    -j) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    --steps) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; steps=$2; shift ;;
    --json) json=(--json) ;;
    --no-fault) fault=0 ;;
    -h|--help) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
  shift
done

bash scripts/install-deps.sh
echo "=== build"
# SG_FAULT_INJECTION: the demo's fault comes from `sgrt launch --inject`.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSG_FAULT_INJECTION=ON >/dev/null
cmake --build build -j "$jobs" --target sgrt_cli resnet50_dist

mkdir -p build/demo
trace=build/demo/resnet50_dist.trace.json
inject=()
[ "$fault" = 1 ] && [ "$steps" -ge 2 ] && inject=(--inject "kill:rank=2,step=$((steps / 2))")
echo
echo "=== sgrt launch -n 4 ${inject[*]} -- resnet50_dist (ResNet-50, data parallel, 4 ranks x 1 thread)"
# The model and its options: scripts/demo.args (also read by the tests).
mapfile -t demo_args < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/demo.args | tr -s ' \t' '\n' | sed '/^$/d')
build/tools/sgrt launch -n 4 "${inject[@]}" -- build/examples/resnet50_dist --steps "$steps" "${demo_args[@]}" \
  --trace "$trace" "${json[@]}"
# With --json rank 0's JSON summary stays the last line of standard output.
note=1
[ ${#json[@]} -gt 0 ] && note=2
echo >&$note
echo "timeline of every rank's ops and allreduces: $trace (open in chrome://tracing or ui.perfetto.dev)" >&$note
