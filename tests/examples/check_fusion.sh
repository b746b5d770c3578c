#!/usr/bin/env bash
# Fusion and the compile cache through a training example (docs/compiler.md).
#
#   check_fusion.sh MODE RESNET50_TRAIN   (mlp: MLP_TRAIN; dist: DIST SGRT)
#
#   parity      5 steps of ResNet-50 (width 16, 32x32) with fusion and with
#               SG_FUSION=0: the same params_hash (fusing relu and residual
#               adds keeps the order of every float operation), and the
#               compiler's figures in the --json summary
#   concurrent  4 processes start cold on one empty cache at once: all
#               succeed with one params_hash; a fifth start is warm (no
#               compiler, a cache hit)
#   corrupt     every file of the entry truncated, or with a flipped byte:
#               a warning, a rebuild, the same params_hash
#   denied      a cache directory that others may write to: refused with a
#               message naming it, the run goes on uncached
#   nospace     (root) the cache on a full tmpfs: "running uncached", the
#               same params_hash
#   dist        (DIST: resnet50_dist, SGRT: the sgrt CLI) 2 ranks, 3 steps, in
#               data parallelism (1 and 2 micro-batches), pipeline and tensor
#               parallelism: fusion on (the log says what was fused) and off
#               give the same params_hash
#   mlp         an MLP whose LayerNorm and GELU are elementwise ops and
#               reductions (mlp_train --decomposed), 5 AdamW steps with and
#               without fusion: params_l2 within 1e-6 relative
set -euo pipefail
mode=$1
bin=$2
work=$(mktemp -d)
trap 'umount "$work/tiny" 2>/dev/null || true; rm -rf "$work"' EXIT
args=(--res 32 --width 16 --batch 4 --steps 5 --threads 2 --json)

# run NAME [env...]: runs the example, keeps stdout's last line in $work/NAME.json, stderr in NAME.err
run() {
  local name=$1
  shift
  env "$@" "$bin" "${args[@]}" >"$work/$name.out" 2>"$work/$name.err" || {
    echo "FAIL: $name exited with status $?" >&2
    cat "$work/$name.err" >&2
    exit 1
  }
  tail -n 1 "$work/$name.out" >"$work/$name.json"
}
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/$1.json" "$2"; }
expect() { # expect WHAT GOT WANT
  [ "$2" = "$3" ] || { echo "FAIL: $1: got $2, want $3" >&2; exit 1; }
  echo "ok: $1 = $2"
}
entry() { find "$work/cache" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended -regex '.*/[0-9a-f]{32}'; }

case $mode in
  parity)
    run fused SG_CACHE_DIR="$work/cache"
    run unfused SG_CACHE_DIR="$work/cache" SG_FUSION=0
    expect "params_hash fused vs unfused" "$(field fused params_hash)" "$(field unfused params_hash)"
    for k in compile_seconds kernels_generated compiler_invocations cache_hits cache_misses ops_fused; do
      field fused "$k" >/dev/null
    done
    [ "$(field fused fused_kernels)" -gt 0 ] || { echo "FAIL: nothing fused" >&2; exit 1; }
    expect "unfused ops_fused" "$(field unfused ops_fused)" 0
    expect "cold compiler_invocations" "$(field fused compiler_invocations)" 1
    expect "cold cache_misses" "$(field fused cache_misses)" 1
    run warm SG_CACHE_DIR="$work/cache"
    expect "warm compiler_invocations" "$(field warm compiler_invocations)" 0
    expect "warm cache_hits" "$(field warm cache_hits)" 1
    expect "warm params_hash" "$(field warm params_hash)" "$(field fused params_hash)"
    ;;
  concurrent)
    pids=()
    for i in 1 2 3 4; do
      SG_CACHE_DIR="$work/cache" "$bin" "${args[@]}" >"$work/p$i.out" 2>"$work/p$i.err" &
      pids+=($!)
    done
    for i in 1 2 3 4; do
      wait "${pids[$((i - 1))]}" || { echo "FAIL: process $i failed" >&2; cat "$work/p$i.err" >&2; exit 1; }
      tail -n 1 "$work/p$i.out" >"$work/p$i.json"
    done
    for i in 2 3 4; do expect "process $i params_hash" "$(field p$i params_hash)" "$(field p1 params_hash)"; done
    expect "entries" "$(entry | wc -l)" 1
    expect "temporary directories left" "$(find "$work/cache" -mindepth 1 -maxdepth 1 -name 'tmp-*' | wc -l)" 0
    run warm SG_CACHE_DIR="$work/cache"
    expect "warm compiler_invocations" "$(field warm compiler_invocations)" 0
    expect "warm params_hash" "$(field warm params_hash)" "$(field p1 params_hash)"
    ;;
  corrupt)
    run first SG_CACHE_DIR="$work/cache"
    want=$(field first params_hash)
    e=$(entry)
    for f in "$e"/*; do
      name=$(basename "$f")
      for how in truncate flip; do
        e=$(entry)
        f=$e/$name
        if [ $how = truncate ]; then
          truncate -s $(($(stat -c %s "$f") / 2)) "$f"
        else
          printf '\x5a' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") / 3)) conv=notrunc status=none
        fi
        run "$name-$how" SG_CACHE_DIR="$work/cache"
        grep -q "is invalid" "$work/$name-$how.err" || {
          echo "FAIL: $name $how: no warning" >&2
          cat "$work/$name-$how.err" >&2
          exit 1
        }
        expect "$name $how: compiler_invocations" "$(field "$name-$how" compiler_invocations)" 1
        expect "$name $how: params_hash" "$(field "$name-$how" params_hash)" "$want"
      done
    done
    ;;
  denied)
    mkdir -m 0777 "$work/cache"
    chmod 0777 "$work/cache"
    run open SG_CACHE_DIR="$work/cache"
    grep -q "may be written by others" "$work/open.err" || {
      echo "FAIL: no message about the world-writable cache" >&2
      cat "$work/open.err" >&2
      exit 1
    }
    expect "entries in a refused cache" "$(entry | wc -l)" 0
    expect "cache_hits" "$(field open cache_hits)" 0
    ;;
  nospace)
    [ "$(id -u)" = 0 ] || { echo "skip: mounting a tmpfs needs root"; exit 77; }
    mkdir "$work/tiny"
    mount -t tmpfs -o size=16k,mode=0700 tmpfs "$work/tiny" 2>/dev/null || {
      echo "skip: cannot mount a tmpfs here"
      exit 77
    }
    run full SG_CACHE_DIR="$work/tiny/cache"
    grep -q "running uncached" "$work/full.err" || {
      echo "FAIL: no warning about the full cache" >&2
      cat "$work/full.err" >&2
      exit 1
    }
    run ref SG_CACHE=0
    expect "params_hash on a full cache" "$(field full params_hash)" "$(field ref params_hash)"
    ;;
  dist)
    sgrt=$3
    for mode in "--micro-batches 1" "--micro-batches 2" "--pipeline 2" "--tensor 2"; do
      for f in 1 0; do
        # shellcheck disable=SC2086 # $mode is two words
        SG_FUSION=$f SG_LOG_LEVEL=info SG_CACHE_DIR="$work/cache" "$sgrt" launch --label -n 2 -- "$bin" --steps 3 \
          --batch 4 --res 32 --width 16 $mode --json >"$work/d$f.out" 2>"$work/d$f.err" || {
          echo "FAIL: $mode, fusion $f: exit status $?" >&2
          cat "$work/d$f.err" >&2
          exit 1
        }
        grep '^\[0\] {' "$work/d$f.out" | tail -n 1 | sed 's/^\[0\] //' >"$work/d$f.json"
      done
      grep -qE '[1-9][0-9]* in [1-9][0-9]* generated kernels' "$work/d1.err" || {
        echo "FAIL: $mode: the session fused nothing" >&2
        cat "$work/d1.err" >&2
        exit 1
      }
      expect "$mode: params_hash fused vs unfused" "$(field d1 params_hash)" "$(field d0 params_hash)"
    done
    ;;
  mlp)
    args=(--hidden 96 --depth 2 --activation gelu --layernorm --decomposed --optimizer adamw --lr 0.003
      --steps 5 --threads 2 --json)
    run fused SG_CACHE_DIR="$work/cache"
    run unfused SG_CACHE_DIR="$work/cache" SG_FUSION=0
    [ "$(field fused fused_kernels)" -gt 4 ] || { echo "FAIL: too little fused" >&2; exit 1; }
    /usr/bin/python3 - "$(field fused params_l2)" "$(field unfused params_l2)" <<'PY'
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
assert abs(a - b) <= 1e-6 * abs(b), (a, b)
print("ok: params_l2 fused %.9g, unfused %.9g" % (a, b))
PY
    ;;
  *)
    echo "check_fusion.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
