#!/usr/bin/env bash
# Tests of the sgrt command-line tool. One CTest test per case:
#   test_cli.sh CASE SGRT DATA_DIR [BUILD_GRAPH]
# CASE: inspect_mlp | inspect_cnn | inspect_onnx | verify | dot | bad_input | help | example | run |
#       partition | not_regular | numbers | example_numbers | cache (the last three need BUILD_GRAPH:
#       the examples it names sit next to it)
# Expected numbers are derived by hand from the graph definitions in
# tests/data/sample_graphs.c and examples/build_graph.c (see the comments),
# not from an earlier run of the tool.
set -euo pipefail

case_name=$1
sgrt=$(readlink -f "$2") data=$(readlink -f "$3") build_graph=${4:+$(readlink -f "$4")}
PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/sgrt-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "test_cli[$case_name]: FAIL: $*" >&2; exit 1; }

# run EXPECTED_RC ARGS...: runs sgrt, leaves stdout/stderr in $work/out, $work/err.
run() {
  local want=$1 rc=0
  shift
  "$sgrt" "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "--- stdout"; cat "$work/out"; echo "--- stderr"; cat "$work/err"
    fail "sgrt $* exited $rc, expected $want"
  fi
}

# run_t EXPECTED_RC ARGS...: run under `timeout 10`, stdin closed; a command that hangs (exit 124)
# fails as a hang. For paths that could block: a FIFO, a device, a socket.
run_t() {
  local want=$1 rc=0
  shift
  timeout 10 "$sgrt" "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  [ "$rc" -ne 124 ] || fail "sgrt $* hung: killed after 10 s"
  if [ "$rc" -ne "$want" ]; then
    echo "--- stdout"; cat "$work/out"; echo "--- stderr"; cat "$work/err"
    fail "sgrt $* exited $rc, expected $want"
  fi
}

# run_prog EXPECTED_RC PROGRAM ARGS...: run_t for another program (an example).
run_prog() {
  local want=$1 prog=$2 rc=0
  shift 2
  timeout 60 "$prog" "$@" >"$work/out" 2>"$work/err" </dev/null || rc=$?
  [ "$rc" -ne 124 ] || fail "$(basename "$prog") $* hung: killed after 60 s"
  if [ "$rc" -ne "$want" ]; then
    echo "--- stdout"; tail -5 "$work/out"; echo "--- stderr"; cat "$work/err"
    fail "$(basename "$prog") $* exited $rc, expected $want"
  fi
}

# re TEXT: TEXT with the characters special to grep -E escaped.
re() { printf '%s' "$1" | sed 's/[][\\.*^$+?(){}|]/\\&/g'; }

# expect_one_error_line REGEX: stderr is exactly one line and matches REGEX.
expect_one_error_line() {
  local n
  n=$(wc -l <"$work/err")
  [ "$n" -eq 1 ] || { cat "$work/err"; fail "expected exactly one stderr line, got $n"; }
  grep -Eq -- "$1" "$work/err" || fail "stderr '$(cat "$work/err")' does not match /$1/"
}

# check_json PYTHON_ASSERTIONS: parses the last stdout line as JSON into `j`
# and runs the assertions (Python statements).
check_json() {
  tail -n 1 "$work/out" >"$work/last.json"
  "$PY" - "$work/last.json" "$1" <<'EOF' || fail "JSON check failed (stdout: $(cat "$work/out"))"
import json, re, sys
with open(sys.argv[1], encoding="utf-8") as f:
    j = json.loads(f.read())
def expect(cond, what):
    if not cond:
        sys.exit("check failed: %s\njson: %s" % (what, json.dumps(j, indent=1)))
exec(sys.argv[2])
EOF
}

# Checks common to every inspect --json object.
INSPECT_COMMON='
for k in ["file", "format_version", "hash", "hash_with_weights", "num_tensors", "num_ops", "ops_by_kind",
          "parameters", "state", "optimizer_state", "constants", "inputs", "outputs"]:
    expect(k in j, "key " + k)
expect(j["format_version"] == "1.0", "format version 1.0")
expect(re.fullmatch("[0-9a-f]{16}", j["hash"]) and re.fullmatch("[0-9a-f]{16}", j["hash_with_weights"]), "hex hashes")
expect(j["hash"] != j["hash_with_weights"], "weights change the hash")
expect(sum(j["ops_by_kind"].values()) == j["num_ops"], "ops_by_kind sums to num_ops")
counts = list(j["ops_by_kind"].values())
expect(counts == sorted(counts, reverse=True), "ops_by_kind sorted by count")
def tensors(lst): return [(t["name"], t["dtype"], t["shape"]) for t in lst]
'

case $case_name in
inspect_mlp)
  # sample_build_mlp: x [8,64], labels [8] i64, lr scalar; fc1 64->32, relu, fc2 32->10,
  # cross_entropy(mean); one sgd_update (momentum) per parameter with "<p>.grad" inputs.
  #   parameters: fc1.weight 32*64=2048, fc1.bias 32, fc2.weight 10*32=320, fc2.bias 10
  #               -> 4 tensors, 2410 elements, 9640 bytes (f32)
  #   optimizer state: one momentum buffer per parameter -> 4 tensors, 2410 elements, 9640 bytes
  #   ops: gemm, relu, gemm, cross_entropy, 4 x sgd_update = 8
  #   tensors: 3 inputs + 4 grads + 4 params + 4 momentum + 4 activations
  #            (fc1 out, relu out, logits, loss; sgd_update has no outputs) = 19
  run 0 inspect "$data/mlp.sgg" --json
  check_json "$INSPECT_COMMON"'
expect(j["num_ops"] == 8, "8 ops")
expect(j["num_tensors"] == 19, "19 tensors")
expect(j["ops_by_kind"] == {"sgd_update": 4, "gemm": 2, "cross_entropy": 1, "relu": 1}, "ops by kind")
expect(list(j["ops_by_kind"]) == ["sgd_update", "gemm", "cross_entropy", "relu"], "order: count, then name")
expect(j["parameters"] == {"count": 4, "elements": 2410, "bytes": 9640}, "parameters")
expect(j["optimizer_state"] == {"count": 4, "elements": 2410, "bytes": 9640}, "optimizer state")
expect(j["state"] == {"count": 0, "elements": 0, "bytes": 0}, "state")
expect(j["constants"]["count"] == 0, "no constants")
expect(tensors(j["inputs"]) == [("x", "f32", [8, 64]), ("labels", "i64", [8]), ("lr", "f32", []),
    ("fc1.weight.grad", "f32", [32, 64]), ("fc1.bias.grad", "f32", [32]),
    ("fc2.weight.grad", "f32", [10, 32]), ("fc2.bias.grad", "f32", [10])], "inputs")
expect(tensors(j["outputs"]) == [("loss", "f32", []), ("logits", "f32", [8, 10])], "outputs")
'
  hash=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hash_with_weights"])')
  # The same bytes under another name give the same hashes; the text form agrees with the JSON.
  cp "$data/mlp.sgg" "$work/copy.sgg"
  run 0 inspect "$work/copy.sgg"
  grep -Eq "^hash \(weights\): +$hash\$" "$work/out" || fail "text output lacks the hash $hash: $(cat "$work/out")"
  grep -Eq '^parameters: +4 tensors, 2410 elements, 9640 bytes' "$work/out" || fail "text parameters line"
  grep -Eq '^ops by kind: +sgd_update 4, gemm 2, cross_entropy 1, relu 1$' "$work/out" || fail "text ops by kind"
  ;;

inspect_cnn)
  # sample_build_cnn: images [2,3,16,16] -> conv1 3->8 3x3 pad 1 (+bias) -> batch_norm (training:
  # 3 outputs) -> relu -> max_pool 2 -> conv2 8->16 3x3 stride 2 groups 2 (no bias) ->
  # global_avg_pool -> flatten -> linear 16->10 -> cross_entropy "loss".
  #   parameters: conv1.weight 8*3*3*3=216, conv1.bias 8, bn1.weight 8, bn1.bias 8,
  #               conv2.weight 16*(8/2)*3*3=576, fc.weight 10*16=160, fc.bias 10
  #               -> 7 tensors, 986 elements, 3944 bytes
  #   state: bn1.running_mean 8, bn1.running_var 8 -> 2 tensors, 16 elements, 64 bytes
  #   ops: 9; tensors: 2 inputs + 7 params + 2 state + 11 activations (3 from batch_norm) = 22
  run 0 inspect "$data/cnn.sgg" --json
  check_json "$INSPECT_COMMON"'
expect(j["num_ops"] == 9, "9 ops")
expect(j["num_tensors"] == 22, "22 tensors")
expect(j["ops_by_kind"] == {"conv2d": 2, "batch_norm": 1, "cross_entropy": 1, "flatten": 1, "gemm": 1,
                            "global_avg_pool": 1, "max_pool2d": 1, "relu": 1}, "ops by kind")
expect(list(j["ops_by_kind"])[0] == "conv2d", "conv2d first")
expect(list(j["ops_by_kind"])[1:] == sorted(list(j["ops_by_kind"])[1:]), "ties sorted by name")
expect(j["parameters"] == {"count": 7, "elements": 986, "bytes": 3944}, "parameters")
expect(j["state"] == {"count": 2, "elements": 16, "bytes": 64}, "state")
expect(j["optimizer_state"] == {"count": 0, "elements": 0, "bytes": 0}, "optimizer state")
expect(tensors(j["inputs"]) == [("images", "f32", [2, 3, 16, 16]), ("labels", "i64", [2])], "inputs")
expect(tensors(j["outputs"]) == [("loss", "f32", [])], "outputs")
'
  ;;

inspect_onnx)
  # tests/data/onnx/cnn_train.onnx, the training export of make_onnx.py's CNN: images [2,3,8,8] ->
  # conv1 3->8 3x3 (+bias) -> bn1 -> relu -> max_pool 2 -> conv2 8->8 3x3 groups 2 (no bias) -> bn2 ->
  # relu6 (exported as Relu + Clip) -> add the pool output -> (Pad, all zero: no op) -> avg_pool 2 ->
  # global_avg_pool -> flatten -> fc 8->10 "logits".
  #   parameters: conv1 8*3*9=216 + 8, bn1 8 + 8, conv2 8*4*9=288, bn2 8 + 8, fc 10*8=80 + 10
  #               -> 9 tensors, 634 elements, 2536 bytes
  #   state: bn{1,2}.running_{mean,var} -> 4 tensors, 32 elements, 128 bytes
  #   ops: conv2d 2, batch_norm 2, relu 2, clip, max_pool2d, add, avg_pool2d, global_avg_pool,
  #        flatten, gemm = 13
  #   tensors: 1 input + 9 parameters + 4 state + 17 activations (3 per batch_norm) = 31
  run 0 inspect "$data/onnx/cnn_train.onnx" --json
  check_json '
expect(j["format"] == "onnx" and j["format_version"] is None, "format")
expect(re.fullmatch("[0-9a-f]{16}", j["hash"]) and j["hash"] != j["hash_with_weights"], "hashes")
expect(j["num_ops"] == 13 and j["num_tensors"] == 31, "counts")
expect(j["ops_by_kind"] == {"batch_norm": 2, "conv2d": 2, "relu": 2, "add": 1, "avg_pool2d": 1, "clip": 1,
                            "flatten": 1, "gemm": 1, "global_avg_pool": 1, "max_pool2d": 1}, "ops by kind")
expect(j["parameters"] == {"count": 9, "elements": 634, "bytes": 2536}, "parameters")
expect(j["state"] == {"count": 4, "elements": 32, "bytes": 128}, "state")
expect(j["constants"]["count"] == 0 and j["optimizer_state"]["count"] == 0, "no constants")
expect([(t["name"], t["dtype"], t["shape"]) for t in j["inputs"]] == [("images", "f32", [2, 3, 8, 8])], "inputs")
expect([(t["name"], t["dtype"], t["shape"]) for t in j["outputs"]] == [("logits", "f32", [2, 10])], "outputs")
'
  run 0 inspect "$data/onnx/cnn_train.onnx"
  grep -Eq '^format: +onnx$' "$work/out" || fail "text format line: $(cat "$work/out")"
  # mlp_eval.onnx has a symbolic batch dim (torch.onnx.export's dynamic_axes): reported as symbolic, by
  # name in the text, in symbolic_dims in the JSON (the shapes then size it 1); --batch sizes it.
  run 0 inspect "$data/onnx/mlp_eval.onnx"
  grep -Eq '^  x +f32 +\[batch,3,4\]$' "$work/out" || fail "inspect does not show x as [batch,3,4]: $(cat "$work/out")"
  grep -q '^symbolic dims: ' "$work/out" || fail "inspect does not say the model has symbolic dims"
  run 0 inspect --json "$data/onnx/mlp_eval.onnx"
  check_json 'expect(j["symbolic_dims"] == [{"input": "x", "dim": 0, "name": "batch"}], "symbolic_dims")
expect([(t["name"], t["shape"]) for t in j["inputs"]] == [("x", [1, 3, 4])], "sized 1")'
  run 0 inspect --batch 5 --json "$data/onnx/mlp_eval.onnx"
  check_json 'expect(j["symbolic_dims"] == [], "--batch: none left")'
  run 0 inspect --batch 5 --json "$data/onnx/mlp_eval.onnx"
  check_json 'expect([(t["name"], t["shape"]) for t in j["inputs"]] == [("x", [5, 3, 4])], "batch 5")
expect([(t["name"], t["shape"]) for t in j["outputs"]] == [("logits", [5, 5])], "logits")'
  run 2 inspect --batch 0 "$data/onnx/mlp_eval.onnx"
  expect_one_error_line "^sgrt: inspect: --batch '0' is not a whole number in \\[1, 1000000\\]"
  # dyn_gpt_bs_ts.onnx has two symbols, batch and seq (dynamic_axes): --dim sizes each by name, and
  # the one it leaves is still reported (sized 1), or sized by --batch.
  gpt="$data/onnx/dyn_gpt_bs_ts.onnx"
  run 0 inspect --json "$gpt"
  check_json 'expect(j["symbolic_dims"] == [{"input": "idx", "dim": 0, "name": "batch"},
                                   {"input": "idx", "dim": 1, "name": "seq"}], "two symbols")'
  run 0 inspect --dim seq=5 --dim batch=3 --json "$gpt"
  check_json 'expect(j["symbolic_dims"] == [], "--dim: none left")
expect([(t["name"], t["shape"]) for t in j["inputs"]] == [("idx", [3, 5])], "3 x 5")
expect([(t["name"], t["shape"]) for t in j["outputs"]] == [("logits", [3, 5, 64])], "logits")'
  run 0 inspect --dim seq=7 "$gpt"
  grep -Eq '^  idx +i64 +\[batch,7\]$' "$work/out" || fail "inspect --dim seq=7: $(cat "$work/out")"
  grep -q '^symbolic dims:   1 ' "$work/out" || fail "inspect --dim seq=7 leaves batch: $(cat "$work/out")"
  run 0 inspect --dim=seq=7 --batch 2 --json "$gpt"
  check_json 'expect([(t["name"], t["shape"]) for t in j["inputs"]] == [("idx", [2, 7])], "--batch for the rest")'
  # Mistakes: on the command line, exit 2; a name the model lacks, exit 1 naming those it has.
  for bad in "seq" "=5" "seq=0" "seq=x" "seq=1000001"; do
    run 2 inspect --dim "$bad" "$gpt"
    expect_one_error_line "^sgrt: inspect: --dim '$(re "$bad")'"
  done
  run 2 inspect --dim seq=5 --dim seq=6 "$gpt"
  expect_one_error_line "^sgrt: inspect: --dim sizes 'seq' twice \\('seq=5' and 'seq=6'\\)"
  run 1 inspect --dim sq=5 "$gpt"
  expect_one_error_line "SG_ERR_NOT_FOUND: .*names 'sq', which no graph input has; the model's named symbolic dims: 'batch', 'seq'"
  run 1 inspect --dim seq=5 "$data/mlp.sgg"
  expect_one_error_line "SG_ERR_INVALID_ARG: --batch and --dim apply to ONNX models"
  # An ONNX model under another name is recognised by not being .sgg; verify and dot take it too.
  cp "$data/onnx/cnn_eval.onnx" "$work/model.bin"
  run 0 verify "$work/model.bin"
  grep -Eq ": ok \([0-9]+ ops, [0-9]+ tensors\)$" "$work/out" || fail "verify model.bin: $(cat "$work/out")"
  run 0 dot --batch 2 "$data/onnx/mlp_eval.onnx" -o "$work/mlp.dot"
  grep -q 'label="x\\n\[2,3,4\] f32' "$work/mlp.dot" || fail "dot of mlp_eval.onnx lacks the input x [2,3,4]"
  # An unsupported op: exit 1, one line naming the op and its node.
  run 1 verify "$data/onnx/bad_unsupported_op.onnx"
  expect_one_error_line "^sgrt: cannot load '.*': SG_ERR_UNSUPPORTED: .*node 'hardmax1' \(Hardmax\)"
  ;;

verify)
  for f in mlp cnn; do
    run 0 verify "$data/$f.sgg"
    [ "$(cat "$work/out")" = "$data/$f.sgg: ok ($([ $f = mlp ] && echo 8 || echo 9) ops, $([ $f = mlp ] && echo 19 || echo 22) tensors)" ] ||
      fail "verify $f printed '$(cat "$work/out")'"
    [ ! -s "$work/err" ] || fail "verify $f wrote to stderr: $(cat "$work/err")"
  done
  run 0 verify --json "$data/cnn.sgg"
  check_json 'expect(j == {"file": j["file"], "ok": True, "num_ops": 9, "num_tensors": 22, "symbolic_dims": []},
       "verify json")
expect(j["file"].endswith("/cnn.sgg"), "file")'
  # A symbolic batch dim does not make a valid model invalid: ok, and the dims named.
  run 0 verify --json "$data/onnx/mlp_eval.onnx"
  check_json 'expect(j["ok"] is True and j["symbolic_dims"] == [{"input": "x", "dim": 0, "name": "batch"}], "symbolic")'
  run 0 verify "$data/onnx/mlp_eval.onnx"
  grep -q ": ok (.*1 symbolic input dim, checked at 1)$" "$work/out" || fail "verify mlp_eval.onnx: $(cat "$work/out")"
  run 0 verify --dim batch=3 "$data/onnx/dyn_gpt_bs_ts.onnx"
  grep -q ": ok (.*1 symbolic input dim, checked at 1)$" "$work/out" || fail "verify --dim batch=3: $(cat "$work/out")"
  run 0 verify --dim batch=3 --dim seq=5 --json "$data/onnx/dyn_gpt_bs_ts.onnx"
  check_json 'expect(j["ok"] is True and j["symbolic_dims"] == [], "both sized")'
  # A damaged file: ok false with the status, and still one line on stderr.
  size=$(stat -c %s "$data/cnn.sgg")
  head -c $((size / 2)) "$data/cnn.sgg" >"$work/half.sgg"
  run 1 verify "$work/half.sgg" --json
  expect_one_error_line "^sgrt: cannot load '.*half\.sgg': SG_ERR_[A-Z_]+: .+"
  check_json 'expect(j["ok"] is False and j["status"].startswith("SG_ERR_") and j["error"], "failure json")'
  ;;

dot)
  command -v dot >/dev/null || fail "graphviz 'dot' is not installed (scripts/install-deps.sh installs it)"
  for f in mlp cnn; do
    run 0 dot "$data/$f.sgg" -o "$work/$f.dot"
    [ ! -s "$work/out" ] || fail "dot -o also wrote to stdout"
    dot -Tsvg "$work/$f.dot" -o "$work/$f.svg" 2>"$work/dot.err" || fail "dot cannot parse $f.dot: $(cat "$work/dot.err")"
    [ ! -s "$work/dot.err" ] || fail "dot warned about $f.dot: $(cat "$work/dot.err")"
    grep -q '<svg' "$work/$f.svg" || fail "no SVG from $f.dot"
    # stdout form is the same text.
    run 0 dot "$data/$f.sgg"
    cmp -s "$work/out" "$work/$f.dot" || fail "dot to stdout differs from dot -o"
  done
  # One box per op, labelled with its kind; every parameter is an ellipse with its shape.
  "$PY" - "$work/mlp.dot" "$work/cnn.dot" <<'EOF' || fail "DOT content check"
import re, sys
mlp, cnn = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
def boxes(t): return re.findall(r'op\d+ \[shape=box[^\]]*label="([a-z0-9_]+)\\n', t)
assert sorted(boxes(mlp)) == sorted(["gemm", "relu", "gemm", "cross_entropy"] + ["sgd_update"] * 4), boxes(mlp)
assert sorted(boxes(cnn)) == sorted(["conv2d", "batch_norm", "relu", "max_pool2d", "conv2d", "global_avg_pool",
                                     "flatten", "gemm", "cross_entropy"]), boxes(cnn)
for name, shape in [("conv1.weight", "[8,3,3,3] f32"), ("conv2.weight", "[16,4,3,3] f32"), ("fc.bias", "[10] f32"),
                    ("bn1.running_var", "[8] f32"), ("images", "[2,3,16,16] f32")]:
    assert re.search(r'shape=ellipse[^\]]*label="%s\\n%s\\n' % (re.escape(name), re.escape(shape)), cnn), name
# Edges carry shapes: max_pool's output [2,8,8,8] feeds conv2.
assert re.search(r'op\d+ -> op\d+ \[label="\[2,8,8,8\] f32"\]', cnn)
# The loss output is drawn.
assert re.search(r'label="loss\\n\[\] f32"', cnn)
EOF
  # A path that cannot be written: exit 1, one line.
  run 1 dot "$data/mlp.sgg" -o "$work/no/such/dir/x.dot"
  expect_one_error_line "^sgrt: cannot write DOT of '.*mlp\.sgg': SG_ERR_IO: .+"
  ;;

bad_input)
  # Damaged copies of a good file.
  good=$data/mlp.sgg
  size=$(stat -c %s "$good")
  head -c $((size / 2)) "$good" >"$work/truncated.sgg"
  head -c 100 "$good" >"$work/header_only.sgg"
  : >"$work/empty.sgg"
  "$PY" -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(4096)))' \
    >"$work/garbage.sgg"
  printf 'this is not a graph\n' >"$work/text.sgg"
  # One byte flipped in the middle of the file (inside a checksummed section).
  "$PY" - "$good" "$work/flipped.sgg" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x5a
open(sys.argv[2], "wb").write(b)
EOF
  mkdir "$work/dir.sgg"
  for cmd in inspect verify dot; do
    for f in missing truncated header_only empty garbage text flipped dir; do
      run 1 "$cmd" "$work/$f.sgg"
      expect_one_error_line "^sgrt: cannot load '$work/$f\.sgg': SG_ERR_[A-Z_]+: .+"
      [ ! -s "$work/out" ] || fail "$cmd $f wrote to stdout: $(cat "$work/out")"
    done
    run 1 "$cmd" "$work/missing.sgg"
    expect_one_error_line "SG_ERR_(IO|NOT_FOUND): "
    run 1 "$cmd" "$work/flipped.sgg"
    expect_one_error_line "SG_ERR_CHECKSUM: "
  done
  # inspect --json on a bad file prints no JSON, only the error line.
  run 1 inspect --json "$work/garbage.sgg"
  expect_one_error_line "SG_ERR_FORMAT: "
  [ ! -s "$work/out" ] || fail "inspect --json printed on failure"

  # Command-line mistakes: exit 2 and one line.
  run 2
  expect_one_error_line "^sgrt: missing command"
  run 2 frobnicate "$good"
  expect_one_error_line "^sgrt: unknown command 'frobnicate'"
  run 2 --bogus
  expect_one_error_line "^sgrt: unknown option '--bogus'"
  run 2 help frobnicate
  expect_one_error_line "unknown command 'frobnicate'"
  run 2 inspect
  expect_one_error_line "^sgrt: inspect: missing argument"
  run 2 inspect --bogus "$good"
  expect_one_error_line "^sgrt: inspect: unknown option '--bogus'"
  run 2 inspect -x "$good"
  expect_one_error_line "unknown option '-x'"
  run 2 inspect "$good" "$good"
  expect_one_error_line "unexpected argument"
  run 2 verify --json=yes "$good"
  expect_one_error_line "option '--json' takes no value"
  run 2 dot "$good" -o
  expect_one_error_line "option '--output' needs a value"
  run 2 dot "$good" --output=
  expect_one_error_line "needs a non-empty value"
  # Output that cannot be written is a failure with one line, not a silent success.
  if [ -w /dev/full ]; then
    for args in "inspect $good" "inspect --json $good" "verify $good" "dot $good" "--help"; do
      rc=0
      # shellcheck disable=SC2086  # args are meant to split
      "$sgrt" $args >/dev/full 2>"$work/err" || rc=$?
      [ $rc -eq 1 ] || fail "sgrt $args >/dev/full exited $rc"
      expect_one_error_line "No space left on device"
    done
  fi
  # A file whose name looks like an option, after "--".
  cp "$good" "$work/-odd.sgg"
  cd "$work"
  run 0 verify -- -odd.sgg
  ;;

help)
  run 0 --help
  for c in inspect verify dot; do grep -Eq "^  $c " "$work/out" || fail "--help does not list $c"; done
  run 0 help
  run 0 help inspect
  grep -q '^usage: sgrt inspect FILE' "$work/out" || fail "help inspect"
  for c in inspect verify dot; do
    run 0 "$c" --help
    grep -q "^usage: sgrt $c " "$work/out" || fail "$c --help"
    grep -q "^exit status:" "$work/out" || fail "$c --help lacks exit codes"
  done
  run 0 --version
  grep -Eq '^sgrt [0-9]+\.[0-9]+\.[0-9]+ \(libsgrt [0-9]+\.[0-9]+\.[0-9]+, \.sgg format [0-9]+\.[0-9]+\)$' "$work/out" ||
    fail "--version printed '$(cat "$work/out")'"
  ;;

example)
  [ -x "$build_graph" ] || fail "examples/build_graph was not built"
  # examples/build_graph.c: images [8,3,32,32], two conv3x3(pad 1)+bias / batch_norm / relu blocks
  # (3->16, max_pool 2, 16->32), global_avg_pool, flatten, linear 32->10, cross_entropy.
  #   parameters: conv1 16*3*9=432 + 16, bn1 16 + 16, conv2 32*16*9=4608 + 32, bn2 32 + 32,
  #               fc 10*32=320 + 10 -> 10 tensors, 5514 elements, 22056 bytes
  #   state: 16+16+32+32 = 96 elements in 4 tensors
  #   ops: conv, bn, relu, pool, conv, bn, relu, gap, flatten, gemm, cross_entropy = 11
  #   tensors: 2 inputs + 10 params + 4 state + 15 activations (3 per batch_norm) = 31
  (cd "$work" && "$build_graph" --json model.sgg) >"$work/out" 2>"$work/err" || fail "build_graph failed: $(cat "$work/err")"
  check_json '
expect(j["path"] == "model.sgg" and j["round_trip_exact"] is True, "path, round trip")
expect(j["num_ops"] == 11 and j["num_tensors"] == 31, "ops and tensors")
expect(j["parameter_tensors"] == 10 and j["parameters"] == 5514 and j["parameter_bytes"] == 22056, "parameters")
import os
expect(j["file_bytes"] == os.path.getsize(os.path.join(os.path.dirname(sys.argv[1]), "model.sgg")), "file size")
'
  example_hash=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(j["hash"], j["hash_with_weights"])')
  grep -q '^summary: ' "$work/out" || fail "no summary line"
  # The CLI, loading the file in another process, agrees with the program that built it.
  run 0 inspect --json "$work/model.sgg"
  check_json "$INSPECT_COMMON"'
expect(j["parameters"] == {"count": 10, "elements": 5514, "bytes": 22056}, "parameters")
expect(j["state"] == {"count": 4, "elements": 96, "bytes": 384}, "state")
expect(j["ops_by_kind"]["conv2d"] == 2 and j["ops_by_kind"]["batch_norm"] == 2, "kinds")
'
  cli_hash=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); print(j["hash"], j["hash_with_weights"])')
  [ "$cli_hash" = "$example_hash" ] || fail "hashes differ: example '$example_hash', sgrt inspect '$cli_hash'"
  # Bad command lines of the example itself.
  rc=0; "$build_graph" --bogus >/dev/null 2>&1 || rc=$?
  [ $rc -eq 2 ] || fail "build_graph --bogus exited $rc"
  rc=0; "$build_graph" "$work/no/such/dir/m.sgg" >/dev/null 2>"$work/err" || rc=$?
  if [ $rc -ne 1 ] || ! grep -q 'save failed: SG_ERR_IO' "$work/err"; then
    fail "build_graph to a bad path: rc $rc, $(cat "$work/err")"
  fi
  ;;

run)
  # sgrt run: an evaluation pass of mlp.sgg (x [8,64] f32, labels [8] i64 -> outputs loss [] and
  # logits [8,10]; lr and the four fed gradients are not read by the pass and are zero-filled).
  # The loss file must be the mean cross entropy of the logits file, computed here with numpy;
  # the logits themselves are checked against weights recomputed independently in
  # tests/python/test_cli_run.py.
  "$PY" - "$work" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(1)
np.save(d + "/x.npy", rng.standard_normal((8, 64)).astype(np.float32))
np.save(d + "/labels.npy", np.array([0, 1, 2, 3, 4, 5, 6, 9], dtype=np.int64))
np.save(d + "/labels32.npy", np.arange(8, dtype=np.int32))
np.save(d + "/x_short.npy", np.zeros((7, 64), np.float32))
np.save(d + "/x64.npy", np.zeros((8, 64)))
open(d + "/trunc.npy", "wb").write(open(d + "/x.npy", "rb").read()[:-4])
open(d + "/text.npy", "w").write("not an array\n")
EOF
  run 0 run "$data/mlp.sgg" --input "x=$work/x.npy" -i "labels=$work/labels.npy" --output "$work/res" --json
  [ ! -s "$work/err" ] || fail "run wrote to stderr: $(cat "$work/err")"
  check_json '
expect([(o["name"], o["dtype"], o["shape"]) for o in j["outputs"]] == [("loss", "f32", []), ("logits", "f32", [8, 10])], "outputs")
expect([o["file"].rsplit("/", 1)[1] for o in j["outputs"]] == ["loss.npy", "logits.npy"], "file names")
expect(j["zero_filled_inputs"] == ["lr", "fc1.weight.grad", "fc1.bias.grad", "fc2.weight.grad", "fc2.bias.grad"], "zero filled")
expect([(i["name"], i["shape"]) for i in j["inputs"]] == [("x", [8, 64]), ("labels", [8])], "inputs")
'
  "$PY" - "$work" <<'EOF' || fail "output check"
import sys, numpy as np
d = sys.argv[1]
logits, loss = np.load(d + "/res/logits.npy"), np.load(d + "/res/loss.npy")
assert logits.dtype == np.float32 and logits.shape == (8, 10) and logits.flags.c_contiguous, logits.dtype
assert loss.dtype == np.float32 and loss.shape == ()
y = np.load(d + "/labels.npy")
z = logits.astype(np.float64)
z = z - z.max(axis=1, keepdims=True)
ce = -(z[np.arange(8), y] - np.log(np.exp(z).sum(axis=1))).mean()
assert abs(ce - float(loss)) <= 1e-5 * max(1, abs(ce)), (ce, float(loss))
assert np.abs(logits).max() > 0
EOF
  # An ONNX export with a symbolic batch dim (mlp_eval.onnx, dynamic_axes): without --batch the size
  # comes from the .npy given for x (4 samples), and the logits are PyTorch's (mlp_logits.f32).
  "$PY" - "$work" "$data/onnx" <<'EOF'
import sys, numpy as np
d, src = sys.argv[1], sys.argv[2]
np.save(d + "/mlp_x.npy", np.fromfile(src + "/mlp_x.f32", dtype="<f4").reshape(4, 3, 4))
EOF
  run 0 run "$data/onnx/mlp_eval.onnx" -i "x=$work/mlp_x.npy" -o "$work/dyn" --json
  check_json 'expect([(o["name"], o["shape"]) for o in j["outputs"]] == [("logits", [4, 5])], "batch 4 from x")'
  "$PY" - "$work" "$data/onnx" <<'EOF' || fail "logits of mlp_eval.onnx with the batch from the input"
import sys, numpy as np
d, src = sys.argv[1], sys.argv[2]
got, want = np.load(d + "/dyn/logits.npy"), np.fromfile(src + "/mlp_logits.f32", dtype="<f4").reshape(4, 5)
assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), np.abs(got - want).max()
EOF
  # Two symbols (batch and seq, dyn_gpt_bs_ts.onnx): each takes its size from the ids' .npy, [3,5];
  # the logits are PyTorch's (dyn_gpt_bs_logits.f32). --dim that disagrees with the file: the
  # session says which shape it wanted.
  "$PY" - "$work" "$data/onnx" <<'EOF'
import sys, numpy as np
d, src = sys.argv[1], sys.argv[2]
np.save(d + "/ids35.npy", np.fromfile(src + "/dyn_gpt_bs_ids.i64", dtype="<i8")[:15].reshape(3, 5))
EOF
  run 0 run "$data/onnx/dyn_gpt_bs_ts.onnx" -i "idx=$work/ids35.npy" -o "$work/gpt" --json
  check_json 'expect([(o["name"], o["shape"]) for o in j["outputs"]] == [("logits", [3, 5, 64])], "3 x 5 from idx")'
  "$PY" - "$work" "$data/onnx" <<'EOF' || fail "logits of dyn_gpt_bs_ts.onnx with batch and seq from the input"
import sys, numpy as np
d, src = sys.argv[1], sys.argv[2]
got, want = np.load(d + "/gpt/logits.npy"), np.fromfile(src + "/dyn_gpt_bs_logits.f32", dtype="<f4").reshape(3, 5, 64)
assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), np.abs(got - want).max()
EOF
  run 0 run "$data/onnx/dyn_gpt_bs_ts.onnx" --dim seq=5 -i "idx=$work/ids35.npy" -o "$work/gpt2"
  cmp -s "$work/gpt/logits.npy" "$work/gpt2/logits.npy" || fail "--dim seq=5 gave other logits"
  run 1 run "$data/onnx/dyn_gpt_bs_ts.onnx" --dim seq=4 -i "idx=$work/ids35.npy" -o "$work/gpt3"
  expect_one_error_line "input 'idx' from '.*ids35\.npy': SG_ERR_SHAPE: .*\[3,4\] i64, given \[3,5\] i64"
  # Text form: one line per output file.
  run 0 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$work/res2" --threads 1
  { [ "$(wc -l <"$work/out")" -eq 2 ] && grep -q "res2/logits.npy: f32 \[8,10\]" "$work/out"; } ||
    fail "text output: $(cat "$work/out")"
  cmp -s "$work/res/logits.npy" "$work/res2/logits.npy" || fail "two runs wrote different logits"
  # Mistakes in the inputs: exit 1, one line naming the input, the C message for a mismatch.
  run 1 run "$data/mlp.sgg" -i "x=$work/x_short.npy" -i "labels=$work/labels.npy" -o "$work/o"
  expect_one_error_line "^sgrt: run: input 'x' from '.*x_short\.npy': SG_ERR_SHAPE: .*\[8,64\].*\[7,64\]"
  run 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels32.npy" -o "$work/o"
  expect_one_error_line "input 'labels' .*SG_ERR_DTYPE: "
  run 1 run "$data/mlp.sgg" -i "x=$work/x64.npy" -i "labels=$work/labels.npy" -o "$work/o"
  expect_one_error_line "^sgrt: run: cannot read input 'x' from .*x64\.npy.*'<f8' is not supported"
  run 1 run "$data/mlp.sgg" -i "x=$work/trunc.npy" -i "labels=$work/labels.npy" -o "$work/o"
  expect_one_error_line "cannot read input 'x' .*truncated"
  run 1 run "$data/mlp.sgg" -i "x=$work/text.npy" -o "$work/o"
  expect_one_error_line "not a \.npy file"
  run 1 run "$data/mlp.sgg" -i "x=$work/missing.npy" -o "$work/o"
  expect_one_error_line "cannot read input 'x' .*No such file"
  run 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -o "$work/o"
  expect_one_error_line "SG_ERR_STATE: .*input 'labels' has not been set"
  run 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "nosuch=$work/labels.npy" -o "$work/o"
  expect_one_error_line "input 'nosuch' .*SG_ERR_NOT_FOUND: "
  run 1 run "$data/mlp.sgg" -i "fc1.bias=$work/labels.npy" -o "$work/o"
  expect_one_error_line "SG_ERR_INVALID_ARG: .*not an input"
  run 1 run "$work/x.npy" -i "x=$work/x.npy" -o "$work/o"
  expect_one_error_line "^sgrt: cannot load "
  : >"$work/afile"
  run 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$work/afile"
  expect_one_error_line "cannot create output directory"
  # Command-line mistakes: exit 2.
  run 2 run "$data/mlp.sgg" -i "x=$work/x.npy"
  expect_one_error_line "^sgrt: run: --output DIR is required"
  run 2 run "$data/mlp.sgg" -i x -o "$work/o"
  expect_one_error_line "NAME=FILE"
  run 2 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "x=$work/x.npy" -o "$work/o"
  expect_one_error_line "given twice"
  run 2 run "$data/mlp.sgg" --threads lots -o "$work/o"
  expect_one_error_line "--threads"
  run 2 run "$data/mlp.sgg" --batch 0 -o "$work/o"
  expect_one_error_line "--batch"
  # --batch sizes ONNX inputs; a .sgg graph's shapes are static.
  run 1 run "$data/mlp.sgg" --batch 4 -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$work/o"
  expect_one_error_line "^sgrt: cannot load .*ONNX"
  run 0 run --help
  { grep -q "^usage: sgrt run MODEL" "$work/out" && grep -q "^exit status:" "$work/out"; } || fail "run --help"
  run 0 --help
  grep -Eq "^  run " "$work/out" || fail "--help does not list run"
  ;;

partition)
  # sgrt partition (docs/partitioning.md). cnn.sgg as a forward graph has no backward ops, so every
  # forward output counts as memory (by hand, f32 = 4 bytes):
  #   sources: images 2*3*16*16 = 1536 el. = 6144 B, labels 2 x i64 = 16, parameters 3944, state 64
  #   outputs: conv1 [2,8,16,16] 16384, batch_norm y 16384 + mean 32 + invstd 32, relu 16384,
  #            max_pool [2,8,8,8] 4096, conv2 [2,16,4,4] 2048, global_avg_pool 128, flatten 128,
  #            gemm [2,10] 80, loss 4
  #   total: 10168 + 55700 = 65868 bytes; 9 ops, one group each.
  FIGURES='["parts", "mode", "cut_bytes", "imbalance_pct", "compute_imbalance_pct", "acyclic", "boundary_tensors",
            "seconds", "per_part"]'
  COMMON='
for k in '"$FIGURES"' + ["random", "boundary", "ops", "groups", "training", "total_memory_bytes", "devices"]:
    expect(k in j, "key " + k)
for k in '"$FIGURES"':
    expect(k in j["random"], "random key " + k)
expect(sum(p["ops"] for p in j["per_part"]) == j["ops"], "every op placed once")
expect(abs(sum(b["bytes"] * len(b["to"]) for b in j["boundary"]) - j["cut_bytes"]) < 1e-6, "cut = boundary bytes")
expect(len(j["boundary"]) == j["boundary_tensors"], "boundary count")
expect(abs(sum(p["memory_bytes"] for p in j["per_part"]) - j["total_memory_bytes"]) < 1e-3, "memory adds up")
expect(j["imbalance_pct"] >= 0 and j["random"]["imbalance_pct"] >= 0, "imbalance")
'
  run 0 partition "$data/cnn.sgg" --parts 2 --json
  check_json "$COMMON"'
expect(j["parts"] == 2 and j["mode"] == "free" and j["training"] is False, "parts, mode")
expect(j["ops"] == 9 and j["groups"] == 9, "9 ops in 9 groups")
expect(j["total_memory_bytes"] == 65868, "memory by hand")
expect(j["file"].endswith("cnn.sgg") and j["train"] is None, "file, train")
'
  first=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); j.pop("seconds"); j["random"].pop("seconds"); print(json.dumps(j, sort_keys=True))')
  run 0 partition "$data/cnn.sgg" --parts 2 --json
  second=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); j.pop("seconds"); j["random"].pop("seconds"); print(json.dumps(j, sort_keys=True))')
  [ "$first" = "$second" ] || fail "two runs with the same seed differ"
  # Training graphs: pipeline stages are acyclic; the nine forward ops still lead the groups.
  for opt in sgd adamw; do
    run 0 partition "$data/cnn.sgg" --parts 3 --mode pipeline --train "$opt" --json
    check_json "$COMMON"'
expect(j["mode"] == "pipeline" and j["acyclic"] is True and j["training"] is True, "acyclic training pipeline")
expect(j["groups"] == 9 and j["ops"] > 9, "backward and update ops joined the forward groups")
expect(j["train"] == "'"$opt"'", "train")
'
  done
  # cnn.sgg has its own loss, so --batch adds nothing here; an ONNX model with a symbolic batch dim
  # needs it, and a loss added on its logits gets a labels input of that many rows.
  if [ -f "$data/onnx/mlp_eval.onnx" ]; then
    run 0 partition "$data/onnx/mlp_eval.onnx" --parts 2 --mode pipeline --train adamw --batch 8 --json
    check_json "$COMMON"'expect(j["training"] is True and j["acyclic"] is True, "ONNX training pipeline")'
  fi
  run 0 partition "$data/cnn.sgg" -k 2 --train sgd --batch 2
  grep -q '^partition of .*cnn.sgg. trained with sgd' "$work/out" || fail "text header"
  grep -Eq '^random ' "$work/out" || fail "text table lacks the random row"
  # The MLP file already has update ops (gradients fed as inputs): partitioned as it is.
  run 0 partition "$data/mlp.sgg" --parts 2 --mode pipeline --json
  check_json "$COMMON"'expect(j["ops"] == 8 and j["acyclic"] is True, "mlp pipeline")'
  run 1 partition "$data/mlp.sgg" --parts 2 --train sgd
  expect_one_error_line "^sgrt: partition --train sgd: cannot build the training graph: SG_ERR_DUPLICATE: .+"
  # DOT coloured by part: one filled box per op, readable by Graphviz.
  run 0 partition "$data/cnn.sgg" --parts 3 --dot "$work/part.dot"
  [ "$(grep -c 'fillcolor=' "$work/part.dot")" -eq 9 ] || fail "DOT has not 9 filled ops"
  if command -v dot >/dev/null; then
    dot -Tsvg "$work/part.dot" -o "$work/part.svg" 2>"$work/dot.err" || fail "dot cannot parse: $(cat "$work/dot.err")"
  fi
  # Devices: a preset; a table too small (need and capacity); a bad table (the field named).
  run 0 partition "$data/cnn.sgg" --devices a100:2 --json
  check_json 'expect(j["parts"] == 2 and j["devices"][1]["name"] == "a100-1", "preset devices")'
  printf '{"devices": [{"preset": "cpu", "memory_bytes": 30000, "count": 2}]}' >"$work/tiny.json"
  run 1 partition "$data/cnn.sgg" --devices "$work/tiny.json"
  expect_one_error_line "^sgrt: cannot partition '.*cnn\.sgg': SG_ERR_RANGE: .*needs 65868 bytes.*capacity"
  printf '{"devices": [{"kind": "gpu", "peak_flops": 1e12, "memory_bytes": -5, "memory_bandwidth": 1e11,
    "link_bandwidth": 1e10, "link_latency_us": 1}]}' >"$work/bad.json"
  run 1 partition "$data/cnn.sgg" --parts 2 --devices "$work/bad.json"
  expect_one_error_line "^sgrt: cannot read device table .*: SG_ERR_FORMAT: .*devices\[0\]\.memory_bytes: must be > 0"
  printf '{"devices": [' >"$work/broken.json"
  run 1 partition "$data/cnn.sgg" --parts 2 --devices "$work/broken.json"
  expect_one_error_line "malformed JSON"
  # Command-line mistakes: exit 2, one line.
  for args in "--parts 0" "--parts 2 --mode diagonal" "--parts 2 --train sgdd" "--mode free" "--parts 2 --batch x"; do
    # shellcheck disable=SC2086  # args are meant to split
    run 2 partition "$data/cnn.sgg" $args
    expect_one_error_line "^sgrt: partition: .+"
  done
  run 1 partition "$work/missing.sgg" --parts 2
  expect_one_error_line "^sgrt: cannot load"
  # More parts than ops (9): refused with both counts, nothing on stdout.
  run 1 partition "$data/cnn.sgg" --parts 100 --json
  expect_one_error_line "SG_ERR_RANGE: sg_partition_create: 100 parts for a graph of 9 ops would leave 91 parts empty"
  [ ! -s "$work/out" ] || fail "partition --parts 100 printed a result"
  run 0 partition "$data/cnn.sgg" --parts 9 --json
  run 0 partition --help
  grep -q "^usage: sgrt partition MODEL" "$work/out" || fail "partition --help"
  ;;

not_regular)
  # Issue 15 item 4: a path that is not a regular file -- a FIFO, a character device (/dev/null,
  # /dev/zero), a UNIX socket, a directory -- as a command's input or output. Each is refused at
  # once: exit 1 and one line naming the path and what it is. Opening a FIFO used to wait for its
  # other end, for ever (exit 124 under run_t's timeout).
  mkfifo "$work/f.sgg" "$work/f.onnx" "$work/f.npy" "$work/f.json" "$work/f.out"
  mkdir "$work/d.sgg"
  "$PY" -c "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$work/s.sgg"
  [ -S "$work/s.sgg" ] || fail "could not make a UNIX socket"
  kind_of() {
    case $1 in
      */f.*) echo "a FIFO" ;;
      */d.sgg) echo "a directory" ;;
      */s.sgg) echo "a socket" ;;
      /dev/*) echo "a character device" ;;
    esac
  }
  # Models: inspect, verify and dot; a .onnx name goes to the ONNX importer, the same check.
  for p in "$work/f.sgg" "$work/f.onnx" /dev/null /dev/zero "$work/s.sgg" "$work/d.sgg"; do
    for cmd in inspect verify dot; do
      run_t 1 "$cmd" "$p"
      expect_one_error_line "^sgrt: cannot load '$(re "$p")': SG_ERR_IO: '$(re "$p")' is $(kind_of "$p"), not a regular file\$"
      [ ! -s "$work/out" ] || fail "$cmd $p wrote to stdout: $(cat "$work/out")"
    done
  done
  # --batch first looks for the .sgg magic: that read must not block either.
  run_t 1 inspect --batch 2 "$work/f.sgg"
  expect_one_error_line "SG_ERR_IO: '$(re "$work/f.sgg")' is a FIFO, not a regular file\$"
  run_t 1 partition "$work/f.sgg" --parts 2
  expect_one_error_line "^sgrt: cannot load '$(re "$work/f.sgg")': SG_ERR_IO: '$(re "$work/f.sgg")' is a FIFO, not a regular file\$"
  run_t 1 partition "$work/f.onnx" --parts 2 --batch 2
  expect_one_error_line "^sgrt: cannot load '$(re "$work/f.onnx")': SG_ERR_IO: .* is a FIFO, not a regular file\$"
  # A FIFO whose other end is open (here, by this shell): reading it would wait for data that never
  # comes, and writing into it would succeed; both are refused.
  exec 3<>"$work/f.sgg"
  run_t 1 verify "$work/f.sgg"
  expect_one_error_line "SG_ERR_IO: '$(re "$work/f.sgg")' is a FIFO, not a regular file\$"
  run_t 1 dot "$data/mlp.sgg" -o "$work/f.sgg"
  expect_one_error_line "^sgrt: cannot write DOT of '$(re "$data/mlp.sgg")': SG_ERR_IO: '$(re "$work/f.sgg")' is a FIFO, not a regular file\$"
  exec 3>&-
  # sgrt run: --input files.
  "$PY" - "$work" <<'EOF'
import sys, numpy as np
np.save(sys.argv[1] + "/x.npy", np.zeros((8, 64), np.float32))
np.save(sys.argv[1] + "/labels.npy", np.arange(8, dtype=np.int64))
EOF
  for p in "$work/f.npy" /dev/zero /dev/null "$work/s.sgg" "$work/d.sgg"; do
    run_t 1 run "$data/mlp.sgg" -i "x=$p" -i "labels=$work/labels.npy" -o "$work/o"
    expect_one_error_line "^sgrt: run: cannot read input 'x' from '$(re "$p")': '$(re "$p")' is $(kind_of "$p"), not a regular file\$"
  done
  run_t 1 run "$work/f.sgg" -i "x=$work/x.npy" -o "$work/o"
  expect_one_error_line "^sgrt: cannot load '$(re "$work/f.sgg")': SG_ERR_IO: .* is a FIFO, not a regular file\$"
  [ ! -e "$work/o" ] || fail "run created its output directory for a model that did not load"
  # sgrt partition: a device table.
  for p in "$work/f.json" /dev/zero "$work/d.sgg"; do
    run_t 1 partition "$data/cnn.sgg" --parts 2 --devices "$p"
    expect_one_error_line "^sgrt: cannot read device table '$(re "$p")': SG_ERR_IO: device table: '$(re "$p")' is $(kind_of "$p"), not a regular file\$"
  done
  # Outputs: an existing path that is not a regular file is refused, not written to or waited on.
  for p in "$work/f.out" /dev/null "$work/s.sgg" "$work/d.sgg"; do
    run_t 1 dot "$data/mlp.sgg" -o "$p"
    expect_one_error_line "^sgrt: cannot write DOT of '$(re "$data/mlp.sgg")': SG_ERR_IO: '$(re "$p")' is $(kind_of "$p"), not a regular file\$"
    run_t 1 partition "$data/cnn.sgg" --parts 2 --dot "$p"
    expect_one_error_line "^sgrt: cannot write DOT of '$(re "$data/cnn.sgg")': SG_ERR_IO: '$(re "$p")' is $(kind_of "$p"), not a regular file\$"
  done
  # sgrt run --output DIR: DIR must be a directory, and DIR/NAME.npy a regular file or new.
  for p in "$work/f.out" /dev/null "$work/s.sgg"; do
    run_t 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$p"
    expect_one_error_line "^sgrt: run: cannot create output directory '$(re "$p")': '$(re "$p")' is $(kind_of "$p"), not a directory\$"
  done
  mkdir "$work/res"
  mkfifo "$work/res/logits.npy"
  run_t 1 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$work/res"
  expect_one_error_line "^sgrt: run: cannot write output 'logits' to '$(re "$work/res/logits.npy")': '$(re "$work/res/logits.npy")' is a FIFO, not a regular file\$"
  [ -p "$work/res/logits.npy" ] || fail "the FIFO DIR/logits.npy was replaced"
  # Regular files and "-" (stdout) still work.
  run_t 0 dot "$data/mlp.sgg" -o -
  head -n 1 "$work/out" | grep -q '^digraph sgrt {$' || fail "dot -o - did not write DOT to stdout"
  run_t 0 dot "$data/mlp.sgg" -o "$work/mlp.dot"
  run_t 0 dot "$data/mlp.sgg" -o "$work/mlp.dot"
  grep -q '^digraph sgrt {$' "$work/mlp.dot" || fail "dot -o FILE (replaced) is not DOT"
  printf '{"devices": [{"preset": "cpu", "count": 2}]}' >"$work/devices.json"
  run_t 0 partition "$data/cnn.sgg" --devices "$work/devices.json" --dot "$work/part.dot" --json
  check_json 'expect(j["parts"] == 2, "two parts from the device table")'
  run_t 0 run "$data/mlp.sgg" -i "x=$work/x.npy" -i "labels=$work/labels.npy" -o "$work/res2"
  ;;

numbers)
  # Issue 15 item 7: every numeric option takes a whole number of decimal digits (or, where a
  # fraction makes sense, a plain decimal or exponent number) within a stated range; anything else
  # is a command-line error (exit 2) that names the option and the value. strtol used to read
  # "1e3" as 1, "3.5" as 3, "1k" as 1, and take "+3" and " 5".
  bad_int() { # RANGE OPTION-AS-NAMED ARGS...: exit 2, "sgrt: CMD: OPTION 'VALUE' is not a whole number in RANGE"
    local range=$1 opt=$2 value=$3 cmd=$4
    shift 4
    run_t 2 "$cmd" "$@"
    expect_one_error_line "^sgrt: $cmd: $(re "$opt") '$(re "$value")' is not a whole number in $(re "$range") \\(see 'sgrt $cmd --help'\\)\$"
  }
  bad_real() {
    local range=$1 opt=$2 value=$3 cmd=$4
    shift 4
    run_t 2 "$cmd" "$@"
    expect_one_error_line "^sgrt: $cmd: $(re "$opt") '$(re "$value")' is not a number in $(re "$range") \\(see 'sgrt $cmd --help'\\)\$"
  }
  for v in 1e3 3.5 1k +3 ' 5' '5 ' 0x10 -1 0 257 99999999999999999999 18446744073709551617 '1 000' 'Ⅻ'; do
    bad_int "[1, 256]" -n "$v" bench allreduce -n "$v" --bytes 1K --iters 1
  done
  # An empty value is refused by the option parser, naming the option.
  run_t 2 bench allreduce -n '' --bytes 1K
  expect_one_error_line "^sgrt: bench: option '--np' needs a non-empty value"
  for v in 3.5 1e3 +3 ' 5' 0 100001; do
    bad_int "[1, 100000]" --iters "$v" bench allreduce -n 2 --bytes 1K --iters "$v"
  done
  for v in 1.5M ' 1K' +1K 1e3 0x400 3 K 1KK 99999999999999999999 17G; do
    run_t 2 bench allreduce -n 2 --bytes "$v"
    expect_one_error_line "^sgrt: bench: --bytes '$(re "$v")' is not a size in \\[4, 17179869184\\] bytes"
  done
  bad_int "[1, 64]" -n 65 bench gpt -n 65
  bad_int "[1, 1000000]" --iters 1e3 bench gpt --iters 1e3
  for v in 1e3 3.5 +3 ' 5' 0 257; do
    bad_int "[1, 256]" -n "$v" launch -n "$v" true
  done
  bad_int "[1, 256]" --np 2.0 launch --np 2.0 true
  bad_int "[0, 1000000]" --restart-failed +1 launch -n 2 --restart-failed +1 true
  run_t 2 launch true
  expect_one_error_line "^sgrt: launch: -n N is required"
  bad_int "[1, 4096]" --nnodes 0 launch -n 2 --nnodes 0 true
  bad_int "[1, 65535]" --master-port 70000 launch -n 2 --master-port 70000 true
  run_t 2 launch -n 2 --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 true
  expect_one_error_line "^sgrt: launch: --node-rank 2 is not below --nnodes 2"
  run_t 2 launch -n 2 --nnodes 2 --node-rank 1 true
  expect_one_error_line "^sgrt: launch: --nnodes 2 needs --master-addr"
  run_t 2 launch -n 2 --nnodes 2 --node-rank 1 --master-addr 10.1.2.3 true
  expect_one_error_line "^sgrt: launch: the rendezvous store's address 10.1.2.3 is not loopback and no job token is set.*SG_JOB_TOKEN"
  run_t 2 launch -n 2 --nnodes 3000 --node-rank 1 --master-addr 127.0.0.1 true
  expect_one_error_line "^sgrt: launch: --nnodes 3000 x -n 2 ranks is more than 4096"
  for v in +3 ' 5' 3.5 1e1 4097 -1; do
    bad_int "[0, 4096]" --threads "$v" run "$data/mlp.sgg" -o "$work/o" --threads "$v"
  done
  for cmd in inspect verify dot; do
    for v in 1e3 ' 5' +5 2.0 0 1000001 99999999999999999999; do
      bad_int "[1, 1000000]" --batch "$v" "$cmd" --batch "$v" "$data/onnx/mlp_eval.onnx"
    done
  done
  bad_int "[1, 1000000]" --batch 1.5 run "$data/mlp.sgg" -o "$work/o" --batch 1.5
  for v in 2.0 +2 ' 2' 1e1 0 1025; do
    bad_int "[1, 1024]" --parts "$v" partition "$data/cnn.sgg" --parts "$v"
  done
  bad_int "[0, 9223372036854775807]" --seed -1 partition "$data/cnn.sgg" --parts 2 --seed -1
  bad_int "[0, 9223372036854775807]" --seed 1e3 partition "$data/cnn.sgg" --parts 2 --seed 1e3
  bad_int "[0, 9223372036854775807]" --seed 9223372036854775808 partition "$data/cnn.sgg" --parts 2 --seed 9223372036854775808
  bad_int "[1, 1024]" "--devices count" 1e3 partition "$data/cnn.sgg" --devices a100:1e3
  for v in ' 5' +5 abc 5% inf nan 0x10 1e999 0 100.5 '5 ' 1e 1.2.3 -; do
    bad_real "[0.01, 100]" --imbalance "$v" partition "$data/cnn.sgg" --parts 2 --imbalance "$v"
  done
  for v in -1 1e7 ' 0.3' +0.3 .5. NaN; do
    bad_real "[0, 1000000]" --alpha "$v" partition "$data/cnn.sgg" --parts 2 --alpha "$v"
  done
  # Good values still work: plain digits, fractions and exponents where a real is wanted.
  run_t 0 partition "$data/cnn.sgg" --parts 2 --imbalance 2.5 --alpha 1e-1 --seed 7 --json
  check_json 'expect(j["parts"] == 2, "2 parts")'
  run_t 0 partition "$data/cnn.sgg" --parts 02 --imbalance 5 --alpha .3 --json
  check_json 'expect(j["parts"] == 2, "02 is 2")'
  run_t 0 partition "$data/cnn.sgg" --devices a100:3 --json
  check_json 'expect(j["parts"] == 3, "a100:3")'
  run_t 0 inspect --batch 3 --json "$data/onnx/mlp_eval.onnx"
  check_json 'expect(j["inputs"][0]["shape"] == [3, 3, 4], "batch 3")'
  run_t 0 bench allreduce -n 2 --bytes 4K --iters 3 --json
  check_json 'expect(j["np"] == 2 and j["bytes"] == 4096, "np 2, 4 KiB")'
  run_t 0 bench allreduce -n 1 --bytes 1KiB --iters 1 --json
  check_json 'expect(j["np"] == 1 and j["bytes"] == 1024, "np 1, 1 KiB")'
  # One rank moves nothing: no bandwidth figure (it used to read thousands of GB/s).
  check_json 'expect(j["algbw_gbs"] is None and j["busbw_gbs"] == 0, "np 1: algbw null, busbw 0")'
  run_t 0 launch -n 2 --restart-failed 0 true
  run_t 0 launch --np 1 -- true
  ;;

example_numbers)
  # The examples' options go through the same parser (examples/common/example_opts.c): exit 2 and
  # "PROG: OPTION 'VALUE' is not a whole number in [MIN, MAX]" (or "a number in (MIN, MAX]").
  exdir=$(dirname "$build_graph")
  for prog in mlp_train resnet50_train resnet50_dist resnet50_onnx_check; do
    [ -x "$exdir/$prog" ] || fail "$exdir/$prog was not built"
  done
  ex_bad() { # PROG KIND RANGE OPTION VALUE ARGS...
    local prog=$1 kind=$2 range=$3 opt=$4 value=$5
    shift 5
    run_prog 2 "$exdir/$prog" "$@"
    expect_one_error_line "^$prog: $(re "$opt") '$(re "$value")' is not $kind in $(re "$range")\$"
  }
  for v in ' 5' 5.0 +5 1e1 0 1025 '' 99999999999999999999; do
    ex_bad mlp_train "a whole number" "[1, 1024]" --batch "$v" --batch "$v"
  done
  for v in abc ' 0.1' +0.1 0 -0.1 1e999 inf nan 0x1p-3 101; do
    ex_bad mlp_train "a number" "(0, 100]" --lr "$v" --lr "$v"
  done
  ex_bad mlp_train "a whole number" "[1, 100000]" --epochs 1e3 --epochs 1e3
  ex_bad mlp_train "a whole number" "[1, 4096]" --threads +3 --threads +3
  ex_bad mlp_train "a whole number" "[0, 18446744073709551615]" --seed -1 --seed -1
  ex_bad mlp_train "a whole number" "[0, 18446744073709551615]" --seed 18446744073709551616 --seed 18446744073709551616
  ex_bad resnet50_train "a whole number" "[2, 65536]" --batch 1e3 --batch 1e3
  ex_bad resnet50_train "a whole number" "[32, 4096]" --res 3.5 --res 3.5
  ex_bad resnet50_train "a number" "[0, 1]" --until-accuracy 1.5 --until-accuracy 1.5
  ex_bad resnet50_train "a number" "(0, 100]" --lr abc --lr abc
  ex_bad resnet50_dist "a whole number" "[1, 3600000]" --heartbeat-ms 1k --heartbeat-ms 1k
  ex_bad resnet50_dist "a number" "(0, 4096]" --bucket-mb 0 --bucket-mb 0
  ex_bad resnet50_dist "a whole number" "[1, 256]" --pipeline +2 --pipeline +2
  ex_bad resnet50_dist "a whole number" "[2, 65536]" --batch ' 5' --batch ' 5'
  ex_bad resnet50_onnx_check "a whole number" "[32, 4096]" RES 1e3 "$work/none.onnx" 1e3 4 10
  ex_bad resnet50_onnx_check "a whole number" "[1, 4096]" --threads 2.5 "$work/none.onnx" 32 4 10 --threads 2.5
  # Good values still work, and reach the program as given.
  run_prog 0 "$exdir/mlp_train" --epochs 1 --batch 256 --threads 1 --lr 5e-2 --seed 3 --json
  check_json 'expect(j["epochs"] == 1 and j["batch"] == 256 and j["threads"] == 1, "mlp_train options")'
  run_prog 0 "$exdir/resnet50_train" --steps 0 --res 32 --width 1 --batch 2 --threads 1 --lr 1e-2 --json
  check_json 'expect(j["res"] == 32 and j["batch"] == 2 and abs(j["lr"] - 0.01) < 1e-12, "resnet50_train options")'
  # --help: on stdout, exit 0, every option with a description; an unknown option is named, a missing value
  # too (exit 2, one line on stderr).
  for prog in mlp_train resnet50_train resnet50_dist; do
    for h in --help -h; do
      run_prog 0 "$exdir/$prog" $h
      [ ! -s "$work/err" ] || fail "$prog $h wrote to stderr: $(cat "$work/err")"
      grep -q "^usage: $prog " "$work/out" || fail "$prog $h: no usage line on stdout"
    done
    /usr/bin/python3 - "$work/out" "$prog" <<'PY' || fail "$prog --help leaves an option undescribed"
import re, sys
text = open(sys.argv[1]).read()
opts = text.split("\noptions:\n", 1)[1].splitlines()
assert len(opts) >= 5, opts
for line in opts:
    m = re.match(r"  (-h, --help|--[a-z0-9-]+(?: \S+)?) +(\S.*)$", line)
    assert m and len(m.group(2)) > 8, "no description: %r" % line
print("%s --help: %d options, each described" % (sys.argv[2], len(opts)))
PY
    run_prog 2 "$exdir/$prog" --bogus-option
    expect_one_error_line "^$prog: unknown option '--bogus-option' \\($prog --help lists the options\\)\$"
    run_prog 2 "$exdir/$prog" --threads
    expect_one_error_line "^$prog: option '--threads' needs a value"
  done
  ;;

cache)
  # `sgrt cache`: a cache filled by real sessions (examples/mlp_train with --decomposed LayerNorm and
  # GELU, whose elementwise ops fuse into generated kernels), two graphs -> two entries. What the
  # tool says is checked against the examples' own reports (fused_kernels, ops_fused), the files on
  # disk (sizes summed here) and `sgrt --version`, not against an earlier run of the tool.
  exdir=$(dirname "$build_graph")
  [ -x "$exdir/mlp_train" ] || fail "$exdir/mlp_train was not built"
  cache="$work/cache"
  export SG_CACHE_DIR="$cache"
  unset SG_CACHE
  run 0 cache list --json
  check_json 'expect(j["count"] == 0 and j["entries"] == [] and j["bytes"] == 0, "an empty cache")'
  run 0 cache info --json
  check_json 'expect(j["exists"] is False and j["entries"] == 0 and j["enabled"] is True, "no directory yet")'
  [ ! -e "$cache" ] || fail "sgrt cache info created the cache directory"
  for h in 16 24; do
    run_prog 0 "$exdir/mlp_train" --decomposed --layernorm --activation gelu --features 16 --hidden $h \
      --steps 1 --threads 1 --json
    tail -n 1 "$work/out" >"$work/train$h.json"
  done
  libv=$("$sgrt" --version | sed -E 's/.*libsgrt ([0-9.]+),.*/\1/')
  # A file and a directory that are not the cache's: clear must leave them.
  echo "mine" >"$cache/notes.txt"
  mkdir "$cache/keep"
  run 0 cache list --json
  check_json '
import os, time
cache = os.environ["SG_CACHE_DIR"]
runs = [json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "train%d.json" % h))) for h in (16, 24)]
expect(all(r["kernels_generated"] > 0 and r["cache_misses"] == 1 for r in runs), "the examples stored entries")
names = sorted(n for n in os.listdir(cache) if re.fullmatch("[0-9a-f]{32}", n))
expect(len(names) == 2 and j["count"] == 2, "two entries: %s" % names)
expect(sorted(e["key"] for e in j["entries"]) == names, "keys are the directory names")
expect(j["dir"] == cache, "dir")
total = 0
for e in j["entries"]:
    d = os.path.join(cache, e["key"])
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    expect(e["bytes"] == size, "bytes of %s: %d, files sum to %d" % (e["key"], e["bytes"], size))
    total += size
    expect(e["valid"] is True and e["problem"] is None, "valid")
    expect(e["device"] == "cpu" and e["sgrt_version"] == "'"$libv"'", "device and version")
    expect(re.fullmatch("[0-9a-f]{16}", e["graph_hash"]), "graph hash")
    expect(e["graph_ops"] > 0 and e["graph_tensors"] > e["graph_ops"] // 2, "graph counts")
    expect(abs(e["created"] - time.time()) < 600, "created now")
    expect(e["compiler"], "compiler")
expect(j["bytes"] == total, "total bytes")
expect(sorted((e["kernels"], e["fused_ops"]) for e in j["entries"]) ==
       sorted((r["fused_kernels"], r["ops_fused"]) for r in runs), "kernels and fused ops as the sessions reported")
c = j["entries"]
expect(c[0]["created"] >= c[1]["created"], "newest first")
'
  keys=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; print(" ".join(e["key"] for e in json.load(sys.stdin)["entries"]))')
  k1=${keys%% *} k2=${keys##* }
  bytes1=$(stat -c %s "$cache/$k1"/* | awk '{s += $1} END {print s}')
  run 0 cache info --json
  check_json 'expect(j["exists"] is True and j["entries"] == 2 and j["temporaries"] == 0, "info counts")
expect(j["bytes"] == '"$(stat -c %s "$cache/$k1"/* "$cache/$k2"/* | awk '{s += $1} END {print s}')"', "info bytes")'
  SG_CACHE=0 "$sgrt" cache info --json >"$work/out" 2>"$work/err" || fail "cache info with SG_CACHE=0"
  check_json 'expect(j["enabled"] is False and j["entries"] == 2, "SG_CACHE=0: off for sessions, still listed")'
  run 0 cache info "$k1" --json
  check_json 'expect(j["key"] == "'"$k1"'" and j["valid"] is True and j["bytes"] == '"$bytes1"', "info KEY")'
  # The text forms: a table with a header, and the fields of one entry.
  run 0 cache list
  grep -Eq '^KEY +SIZE +CREATED +GRAPH +KERNELS +DEVICE +STATUS$' "$work/out" || fail "list header: $(cat "$work/out")"
  grep -Eq "^$k1 .* cpu +ok\$" "$work/out" || fail "list row of $k1: $(cat "$work/out")"
  grep -Eq "^2 entries, .* in $(re "$cache")\$" "$work/out" || fail "list total: $(cat "$work/out")"
  run 0 cache info "$k1"
  grep -Eq '^valid: +yes$' "$work/out" && grep -Eq '^device: +cpu$' "$work/out" || fail "info KEY text: $(cat "$work/out")"
  # A flipped byte in a kernel: listed as invalid, and left for the next session to replace.
  "$PY" -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(100); b = f.read(1); f.seek(100); f.write(bytes([b[0] ^ 0x40]))' \
    "$cache/$k2/kernels.so"
  run 0 cache info "$k2" --json
  check_json 'expect(j["valid"] is False and "does not match its checksum" in j["problem"], "a corrupt entry")'
  run 0 cache list
  grep -Eq "^$k2 .*invalid: 'kernels.so' does not match its checksum\$" "$work/out" || fail "list: $(cat "$work/out")"
  [ -d "$cache/$k2" ] || fail "listing removed the corrupt entry"
  # Mistakes: exit 2 with one line for a bad command line, 1 for an entry that does not exist.
  run 2 cache clear xyz
  expect_one_error_line "^sgrt: cache: KEY 'xyz' is not 32 hex digits"
  run 2 cache info 0123456789abcdef0123456789abcdeg
  expect_one_error_line "is not 32 hex digits"
  run 2 cache list "$k1"
  expect_one_error_line "list takes no KEY"
  run 2 cache frob
  expect_one_error_line "unknown action 'frob'"
  run 2 cache
  run 1 cache clear 00000000000000000000000000000000
  expect_one_error_line '^sgrt: cache clear 0{32}: SG_ERR_NOT_FOUND: .*no entry 0{32}'
  run 1 cache info 00000000000000000000000000000000
  expect_one_error_line 'SG_ERR_NOT_FOUND'
  # A cache others may write to is refused, and nothing is removed.
  chmod 777 "$cache"
  run 1 cache clear
  expect_one_error_line 'SG_ERR_DENIED: .*may be written by others \(mode 777\)'
  chmod 700 "$cache"
  [ -d "$cache/$k1" ] || fail "a refused clear removed an entry"
  # Clear one (by key in upper case, through --dir), then the rest.
  unset SG_CACHE_DIR
  run 0 cache clear "$(tr a-f A-F <<<"$k1")" --dir "$cache" --json
  check_json 'expect(j["removed"] == 1 and j["key"] is not None, "clear KEY")'
  [ ! -e "$cache/$k1" ] || fail "$k1 is still there"
  run 0 cache list --dir "$cache" --json
  check_json 'expect([e["key"] for e in j["entries"]] == ["'"$k2"'"], "one entry left")'
  run 0 cache clear --dir "$cache"
  grep -Eq "^removed 1 entry from $(re "$cache")\$" "$work/out" || fail "clear: $(cat "$work/out")"
  [ "$(ls -A "$cache" | sort | tr '\n' ' ')" = "keep notes.txt " ] || fail "clear left: $(ls -A "$cache")"
  run 0 cache clear --dir "$cache" --json
  check_json 'expect(j["removed"] == 0, "nothing left to clear")'
  # `--help` lists the command.
  run 0 --help
  grep -Eq '^  cache ' "$work/out" || fail "--help does not list cache"
  run 0 cache --help
  grep -q '^usage: sgrt cache list' "$work/out" && grep -q '^exit status:' "$work/out" || fail "cache --help"
  ;;

devices)
  # GPUs or the reason there are none (this machine: no driver); RDMA devices
  # or the transport UCX falls back to. Text and JSON agree.
  run 0 devices --json
  check_json '
for k in ["gpus", "cuda_driver", "cuda_runtime", "rdma_devices", "transport"]:
    expect(k in j, "key " + k)
for g in j["gpus"]:
    expect(re.fullmatch("cuda:[0-9]+", g["device"]) and re.fullmatch("[0-9]+\\.[0-9]", g["compute_capability"]), "gpu fields")
    expect(g["memory_bytes"] > 0 and g["multiprocessors"] > 0 and g["name"], "gpu sizes")
expect(j["gpus"] or len(j["no_gpu_reason"]) > 10, "a reason when there is no GPU")
expect(j["transport"] == ("rdma" if j["rdma_devices"] else "tcp+shm"), "transport")'
  gpus=$(tail -n 1 "$work/out" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))')
  run 0 devices
  if [ "$gpus" -eq 0 ]; then
    grep -Eq '^no GPUs: .{10,}' "$work/out" || fail "devices: no reason given: $(cat "$work/out")"
  else
    [ "$(grep -c '^cuda:' "$work/out")" -eq "$gpus" ] || fail "devices: $(cat "$work/out")"
  fi
  run 2 devices --frobnicate
  ;;

*)
  fail "unknown case '$case_name'"
  ;;
esac
echo "test_cli[$case_name]: ok"
