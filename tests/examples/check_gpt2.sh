#!/usr/bin/env bash
# GPT-2 example checks (examples/gpt2), one mode per CTest test:
#   learns BIN   the tiny preset, 400 steps of 8 x 64 bytes of the licence
#                texts of base-files (/usr/share/common-licenses): the loss
#                falls from about ln 256 = 5.55 to under 3.1 (the mean of the
#                last 10 steps; 2.78 and 2.66 were measured with seeds 1 and
#                2), the held-out loss under 3.3 (3.03, 2.84), and a 100-byte
#                sample follows the prompt;
#   errors BIN   --help exits 0 and names every option; a bad preset, bad
#                sizes and a missing data path exit with a message naming
#                what was wrong;
#   dropout BIN  the tiny preset, 30 steps with --dropout 0.1: the fused attention (its masks drawn
#                inside the kernel, again in backward) and the unfused one (a dropout op on softmax's
#                output, the same seed) give the same losses (within 1e-5; the same digits were
#                measured), and both differ from the run without dropout;
#   bf16 BIN     the tiny preset, 60 steps with --matmul-precision bf16 and with f32: the bf16 run's
#                first, final and held-out losses are within 0.1 % of the f32 run's (8e-6 to 4e-5 relative were
#                measured) yet not the same (the option took effect), its JSON names the precision,
#                and SG_MATMUL_PRECISION=bf16 gives the option's losses exactly; on a CPU without bf16
#                dot-product instructions the run is refused with a message saying why (exit 77, skipped);
#   profile BIN  SG_PROFILE=2 over 3 steps of the tiny preset (about 150 ops):
#                the per-kind table sums to the step, and "slowest ops" lists
#                12 ops, slowest first (the list once read an index it had
#                not written yet and crashed).
set -euo pipefail
mode=$1
bin=$2
py=/usr/bin/python3
case $mode in
  learns)
    out=$("$bin" --preset tiny --steps 400 --batch 8 --warmup 20 --lr 3e-3 --min-lr 3e-4 --sample 100 --prompt "The " --json)
    echo "$out" | tail -n 1 | "$py" -c '
import json, math, sys
r = json.loads(sys.stdin.read())
print("loss %.3f at step 1, %.3f over the last steps, held-out %.3f; %.0f tokens/s; sample %r" % (
    r["first_loss"], r["final_loss"], r["val_loss"], r["tokens_per_second"], r["sample"]))
assert abs(r["first_loss"] - math.log(256)) < 0.3, "the untrained model is not near ln 256"
assert r["final_loss"] < 3.1, "the loss did not fall under 3.1"
assert r["val_loss"] < 3.3, "the held-out loss did not fall under 3.3"
assert r["sample"].startswith("The ") and len(r["sample"]) == 104, "no 100-byte sample after the prompt"
assert r["parameters"] == 120576, r["parameters"]
'
    ;;
  errors)
    "$bin" --help | grep -q -- "--preset" || { echo "--help does not list --preset"; exit 1; }
    expect() { # expect STATUS PATTERN ARGS...: exit status and a stderr line
      local want=$1 pat=$2 rc=0
      shift 2
      err=$("$bin" "$@" 2>&1 > /dev/null) || rc=$?
      [ "$rc" = "$want" ] || { echo "gpt2_train $*: exit $rc, want $want: $err"; exit 1; }
      echo "$err" | grep -q -- "$pat" || { echo "gpt2_train $*: no '$pat' in: $err"; exit 1; }
      echo "ok: gpt2_train $*: $(echo "$err" | tail -n 1)"
    }
    expect 2 "--preset 'huge' is not tiny, mini or small" --preset huge
    expect 2 "width 64 is not a multiple of heads 5" --preset tiny --heads 5
    expect 2 "seq 65 exceeds the context 64" --preset tiny --seq 65
    expect 2 "--steps" --steps -1
    expect 1 "--data '/nonexistent': cannot read it" --preset tiny --data /nonexistent
    expect 2 "--matmul-precision 'fp8' is not f32 or bf16" --preset tiny --matmul-precision fp8
    ;;
  dropout)
    run() { "$bin" --preset tiny --steps 30 --sample 0 --json "$@" | tail -n 1; }
    { run --dropout 0.1 --attention fused; run --dropout 0.1 --attention unfused; run --attention fused; } | "$py" -c '
import json, sys
fused, unfused, none = (json.loads(l) for l in sys.stdin.read().splitlines())
keys = ("first_loss", "final_loss", "val_loss")
for k in keys:
    print("%s: fused %.7f, unfused %.7f, without dropout %.7f" % (k, fused[k], unfused[k], none[k]))
    assert abs(fused[k] - unfused[k]) <= 1e-5 * abs(unfused[k]), "%s: the fused attention with dropout is not the unfused one" % k
assert abs(fused["final_loss"] - none["final_loss"]) > 1e-3, "dropout 0.1 changed nothing"
'
    ;;
  bf16)
    run() { "$bin" --preset tiny --steps 60 --sample 0 --json "$@" | tail -n 1; }
    rc=0
    err=$("$bin" --preset tiny --steps 1 --sample 0 --matmul-precision bf16 2>&1 > /dev/null) || rc=$?
    if [ "$rc" != 0 ]; then
      echo "$err" | grep -q "needs bf16 dot-product instructions" || { echo "bf16 failed: $err"; exit 1; }
      echo "skipped: $(echo "$err" | tail -n 1)"
      exit 77
    fi
    { run --matmul-precision bf16; run --matmul-precision f32; SG_MATMUL_PRECISION=bf16 run; } | "$py" -c '
import json, sys
bf16, f32, env = (json.loads(l) for l in sys.stdin.read().splitlines())
assert (bf16["matmul_precision"], f32["matmul_precision"], env["matmul_precision"]) == ("bf16", "f32", "bf16")
for k in ("first_loss", "final_loss", "val_loss"):
    rel = abs(bf16[k] - f32[k]) / abs(f32[k])
    print("%s: bf16 %.6f, f32 %.6f (%.2e apart)" % (k, bf16[k], f32[k], rel))
    assert rel <= 1e-3, "%s: bf16 products moved the loss by more than 0.1 %%" % k
    assert bf16[k] == env[k], "SG_MATMUL_PRECISION=bf16 is not --matmul-precision bf16"
assert bf16["final_loss"] != f32["final_loss"], "--matmul-precision bf16 changed nothing"
assert bf16["final_loss"] < bf16["first_loss"] - 0.5, "the bf16 run did not learn"
'
    ;;
  profile)
    err=$(SG_PROFILE=2 "$bin" --preset tiny --steps 3 --sample 0 2>&1 > /dev/null)
    echo "$err" | "$py" -c '
import re, sys
lines = sys.stdin.read().splitlines()
head = [l for l in lines if l.startswith("sgrt profile:")]
assert len(head) == 1, "no profile header in:\n" + "\n".join(lines)
ops, step_ms = re.match(r"sgrt profile: (\d+) ops per step, ([\d.]+) ms", head[0]).groups()
at = lines.index(head[0])
kinds, i = [], at + 2
while not lines[i].startswith("  slowest ops:"):
    name, n, ms, share = lines[i].rsplit(None, 3)
    kinds.append((int(n), float(ms)))
    i += 1
assert sum(n for n, _ in kinds) == int(ops), (kinds, ops)
assert abs(sum(ms for _, ms in kinds) - float(step_ms)) <= 0.01 * float(step_ms) + 0.05 * len(kinds), kinds
slow = [float(l.split()[0]) for l in lines[i + 1:i + 13] if l.startswith("    ") and l.split()[1] == "ms"]
assert len(slow) == 12, "slowest ops: %d lines" % len(slow)
assert slow == sorted(slow, reverse=True), slow
print("profile: %s ops, %s ms per step, %d kinds, slowest %.2f ms" % (ops, step_ms, len(kinds), slow[0]))
'
    ;;
  *) echo "usage: check_gpt2.sh learns|errors|dropout|profile BIN" >&2; exit 2 ;;
esac
