#!/usr/bin/env bash
# TensorBoard scalars (docs/examples.md "Metrics"): resnet50_dist --tensorboard DIR on 2 ranks writes
# an event file that the tensorboard package's own reader (EventAccumulator) reads back: every step
# of every scalar, the loss curve equal (as float32) to the --metrics-file one of the same run.
# The package comes from the virtual environment scripts/install-deps.sh makes
# (${XDG_CACHE_HOME:-~/.cache}/sgrt/py-tools), SG_TENSORBOARD_PYTHON, or the system; exit 77 (skip)
# when none has it.
# usage: check_tensorboard.sh SGRT RESNET50_DIST
set -euo pipefail
sgrt=$1 bin=$2
py=
for c in "${SG_TENSORBOARD_PYTHON:-}" "${XDG_CACHE_HOME:-$HOME/.cache}/sgrt/py-tools/bin/python" /usr/bin/python3; do
  [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import tensorboard' 2>/dev/null && { py=$c; break; }
done
[ -n "$py" ] || { echo "SKIP: no Python with the tensorboard package (scripts/install-deps.sh installs one)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/tb"
steps=6
"$sgrt" launch -n 2 -- "$bin" --steps $steps --res 32 --width 8 --batch 2 --tensorboard "$work/tb" \
  --metrics-file "$work/steps.jsonl" --json >"$work/out" 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
"$py" - "$work/tb" "$work/steps.jsonl" "$steps" <<'PY'
import json, struct, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
tb, steps_file, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ea = EventAccumulator(tb)
ea.Reload()
tags = ea.Tags()["scalars"]
for t in ("loss", "images_per_s", "step_ms", "compute_ms", "exposed_comm_ms", "healthy_ranks", "recoveries"):
    assert t in tags, (t, tags)
    assert [e.step for e in ea.Scalars(t)] == list(range(1, n + 1)), (t, [e.step for e in ea.Scalars(t)])
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
want = [f32(json.loads(l)["loss"]) for l in open(steps_file)]
got = [e.value for e in ea.Scalars("loss")]
assert got == want, (got, want)
print("ok: tensorboard's EventAccumulator reads %d steps of %d scalars; loss %s" % (n, len(tags), ["%.4f" % v for v in got]))
PY
