#!/usr/bin/env bash
# ResNet-50 example checks (examples/resnet50), one mode per CTest test:
#   params BIN         the parameter count is torchvision's: 25,557,032 with
#                      1,000 classes (and 23,528,522 with 10), compared with
#                      sum(p.numel() for p in resnet50().parameters()) when
#                      torchvision is installed;
#   learns BIN         at 64x64 the training accuracy on the generated data
#                      reaches 90% within 80 steps (SGD, momentum 0.9);
#   defaults BIN       with its default options the example lowers the loss
#                      over its first 10 steps;
#   onnx BIN DIR       the C-built model and the ONNX import of torchvision's
#                      own ResNet-50 give the same loss (resnet50_onnx_check);
#                      exits 77 (skipped) without torch/torchvision/onnx.
set -euo pipefail
mode=$1
bin=$2
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
json_field() { "$py" -c 'import json, sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
case $mode in
  params)
    for classes in 1000 10; do
      out=$("$bin" --steps 0 --classes "$classes" --json | tail -n 1)
      echo "$out"
      got=$(echo "$out" | json_field param_count)
      want=$([ "$classes" = 1000 ] && echo 25557032 || echo 23528522)
      if "$py" -c 'import torchvision' 2>/dev/null; then
        want=$("$py" -c 'import sys, torchvision
m = torchvision.models.resnet50(weights=None, num_classes=int(sys.argv[1]))
print(sum(p.numel() for p in m.parameters()))' "$classes")
      fi
      [ "$got" = "$want" ] || { echo "param_count $got, torchvision has $want" >&2; exit 1; }
      echo "ok: $classes classes, $got parameters"
    done
    ;;
  learns)
    out=$("$bin" --res 64 --batch 16 --classes 10 --lr 0.01 --steps 80 --until-accuracy 0.9 --threads 2 --seed 1 --json)
    echo "$out" | tail -n 1
    echo "$out" | tail -n 1 | "$py" -c '
import json, sys
r = json.loads(sys.stdin.read())
for k in ("images_per_second", "final_loss", "train_accuracy", "peak_rss_mb", "params_hash", "params_l2",
          "params_sum", "param_count"):
    assert k in r, k
assert r["reached_at_step"] > 0 and r["train_accuracy"] >= 0.90, \
    "training accuracy %.4f after %d steps, want >= 0.90" % (r["train_accuracy"], r["steps"])
print("ok: %.1f%% training accuracy at step %d" % (100 * r["train_accuracy"], r["reached_at_step"]))
'
    ;;
  defaults)
    "$bin" --steps 10 --json | tail -n 1 | "$py" -c '
import json, sys
r = json.loads(sys.stdin.read())
print("loss %.4f at step 1, %.4f at step %d (lr %g)" % (r["first_loss"], r["final_loss"], r["steps"], r["lr"]))
assert r["final_loss"] < r["first_loss"], "the default options do not lower the loss"
'
    ;;
  onnx)
    dir=$3
    mkdir -p "$dir"
    rc=0
    "$py" -W ignore "$here/../../examples/resnet50/export_torchvision.py" "$dir/resnet50_32.onnx" --res 32 --batch 4 --classes 10 --form train --randomize-bn || rc=$?
    [ "$rc" = 0 ] || exit "$rc"
    "$bin" "$dir/resnet50_32.onnx" 32 4 10 --threads 2
    ;;
  *) echo "usage: check_resnet50.sh params|learns|defaults|onnx BIN [DIR]" >&2; exit 2 ;;
esac
