#!/usr/bin/env bash
# Profile-guided repartitioning of a running pipeline (SPEC P6,
# docs/pipeline_parallel.md "Repartitioning a running pipeline"): ResNet-50
# (resnet50_dist: width 64, 64x64, batch 8, 4 micro-batches) as a 2-stage
# pipeline on 2 local ranks whose rank 1 computes F times slower from step 1
# (an injected 'slow' fault, as a shared or slower CPU). Two runs side by
# side, in this order: the same job with repartitioning off
# (--repartition-p99-ms -1, the peer: what the job does without it), then
# with the library's defaults. Prints steps/s before and after the first
# re-cut, the re-cuts, the bytes moved, and the ratios: after / before
# within the repartitioning run, and repartitioning run / peer over the steps
# after the switch.
#
#   bench/repartition.sh [--build DIR] [--json] [--steps N] [--factor F] [--width N] [--res N]
#                        [--batch N] [--micro N] [--logs DIR]
#
# Defaults: build, 20 steps, factor 3, width 64, res 64, batch 8, micro 4.
# The build needs -DSG_FAULT_INJECTION=ON (slow faults come from `sgrt launch --inject`).
set -u
build=build json=0 steps=20 factor=3 width=64 res=64 batch=8 micro=4 logs=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --json) json=1; shift ;;
    --steps) steps=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --res) res=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--json] [--steps N] [--factor F] [--width N] [--res N] [--batch N] [--micro N] [--logs DIR]" >&2; exit 2 ;;
  esac
done
sgrt=$build/tools/sgrt
prog=$build/examples/resnet50_dist
if [ ! -x "$sgrt" ] || [ ! -x "$prog" ]; then
  echo "repartition.sh: build $build first (sgrt and resnet50_dist, configured with -DSG_FAULT_INJECTION=ON)" >&2
  exit 2
fi
fault="slow:rank=1,step=1,factor=$factor"
args=(--pipeline 2 --micro-batches "$micro" --steps "$steps" --warmup 1 --res "$res" --batch "$batch"
      --width "$width" --threads 1 --json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME EXTRA...: the job, its rank 0's JSON line into $tmp/NAME.json
run() {
  local name=$1
  shift
  [ $json = 1 ] || echo "command: $sgrt launch --inject $fault -n 2 -- $prog ${args[*]} $*"
  "$sgrt" launch --inject "$fault" -n 2 -- "$prog" "${args[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  if [ -n "$logs" ]; then mkdir -p "$logs" && cp "$tmp/$name.out" "$tmp/$name.err" "$logs/"; fi
  if ! grep -o '{"example":"resnet50_dist".*}' "$tmp/$name.out" | tail -1 >"$tmp/$name.json" ||
    [ ! -s "$tmp/$name.json" ]; then
    echo "repartition.sh: the $name run gave no result (launcher status $rc); stderr:" >&2
    tail -20 "$tmp/$name.err" >&2
    exit 1
  fi
}
run peer --repartition-p99-ms -1
run recut
grep -h "pipeline re-cut" "$tmp/recut.err" | sed 's/^\[[0-9]*\] //' >"$tmp/lines"

python3 - "$tmp/peer.json" "$tmp/recut.json" "$tmp/lines" "$json" "$factor" "$width" "$res" "$batch" "$micro" "$steps" <<'EOF'
import json, sys
peer, recut = (json.load(open(p)) for p in sys.argv[1:3])
lines = open(sys.argv[3]).read().splitlines()
as_json = sys.argv[4] == "1"
before, after = recut["steps_per_s_before"], recut["steps_per_s_after"]
# The peer over the same steps as the recut run's "after": its median over the run (no switch in it).
peer_sps = 1e3 / peer["ms_per_step"] if peer["ms_per_step"] > 0 else 0
out = {
    "bench": "repartition", "fault": "slow:rank=1,step=1,factor=" + sys.argv[5],
    "width": int(sys.argv[6]), "res": int(sys.argv[7]), "batch": int(sys.argv[8]), "micro_batches": int(sys.argv[9]),
    "steps": int(sys.argv[10]), "repartitions": recut["repartitions"], "repartition_step": recut["repartition_step"],
    "migrated_bytes": recut["migrated_bytes"], "steps_per_s_before": before, "steps_per_s_after": after,
    "speedup_after_over_before": after / before if before > 0 else 0,
    "peer_steps_per_s": peer_sps, "peer_repartitions": peer["repartitions"],
    "speedup_after_over_peer": after / peer_sps if peer_sps > 0 else 0,
    "final_loss": recut["final_loss"], "peer_final_loss": peer["final_loss"],
}
if not as_json:
    for l in lines:
        print(l)
    print(f"repartitioning off (peer): {peer_sps:.3f} steps/s, {peer['repartitions']} re-cuts")
    print(f"repartitioning on: {recut['repartitions']} re-cut(s), the first after step {recut['repartition_step']}; "
          f"{before:.3f} steps/s before, {after:.3f} after ({out['speedup_after_over_before']:.2f}x); "
          f"{recut['migrated_bytes'] / 1e6:.1f} MB of state moved; after / peer {out['speedup_after_over_peer']:.2f}x")
print(json.dumps(out))
EOF
