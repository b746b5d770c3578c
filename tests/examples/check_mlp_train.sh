#!/usr/bin/env bash
# The MLP example must learn its generated dataset: >= 90% held-out accuracy,
# with SGD and with AdamW, and print one JSON object as its last line; also
# deeper, with LayerNorm and GELU (both forms), and stopped by --steps.
set -euo pipefail
bin=$1
for opt in sgd adamw; do
  lr=0.05
  [ "$opt" = adamw ] && lr=0.003
  out=$("$bin" --optimizer "$opt" --lr "$lr" --epochs 5 --threads 2 --json)
  echo "$out" | tail -n 1
  echo "$out" | tail -n 1 | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
for k in ("accuracy", "final_loss", "params_hash", "params_l2", "params_sum", "steps"):
    assert k in r, k
assert r["accuracy"] >= 0.90, "accuracy %.4f < 0.90" % r["accuracy"]
assert r["planned_peak_bytes"] < r["sum_tensor_bytes"], r
print("ok: %s accuracy %.4f" % (r["optimizer"], r["accuracy"]))
'
done
for act in gelu gelu-tanh; do
  out=$("$bin" --depth 2 --hidden 64 --layernorm --activation "$act" --epochs 3 --threads 2 --json)
  echo "$out" | tail -n 1
  echo "$out" | tail -n 1 | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["depth"] == 2 and r["layernorm"] is True and r["hidden"] == 64, r
assert r["accuracy"] >= 0.90, "accuracy %.4f < 0.90" % r["accuracy"]
assert r["ms_per_step"] > 0, r
print("ok: %s with layernorm, accuracy %.4f" % (r["activation"], r["accuracy"]))
'
done
out=$("$bin" --steps 10 --features 16 --threads 2 --json)
echo "$out" | tail -n 1 | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["steps"] == 10 and r["epochs"] == 1 and r["features"] == 16 and r["ms_per_step"] > 0, r
print("ok: --steps 10")
'
# --json: stdout is the JSON object alone, and the progress lines still come, on stderr (a run is never
# silent), as `mlp_train --json | python3 -m json.tool` needs.
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$("$bin" --steps 3 --threads 2 --json 2>"$err")
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || { echo "FAIL: --json printed more than the JSON on stdout: $out" >&2; exit 1; }
printf '%s\n' "$out" | /usr/bin/python3 -m json.tool >/dev/null
grep -q '^epoch 1  loss' "$err" || { echo "FAIL: no progress line on stderr with --json" >&2; cat "$err" >&2; exit 1; }
echo "ok: --json alone on stdout, progress on stderr"
