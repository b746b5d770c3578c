#!/usr/bin/env bash
# What fusion buys (issue 17; docs/performance.md "Fusion"): sgrt with fusion
# off (SG_FUSION=0) and on (SG_FUSION=1) side by side in one run, against
# PyTorch 1.13 (Debian's, /usr/bin/python3), PyTorch 2.x eager and PyTorch 2.x
# torch.compile (the stronger peer; from the environment of
# bench/torch_venv.sh, skipped with a note where it does not exist).
#
#   bench/fusion.sh [--build DIR] [--steps N] [--mlp-steps N] [--threads N] [--repeat N]
#                   [--quiet-load X] [--models "mlp mlp-decomposed resnet50"] [--configs "224x8 64x16"]
#                   [--peers "1.13 eager compile"] [--layouts "cl nchw"] [--json]
#
# Workloads: mlp, an elementwise-heavy MLP (build/examples/mlp_train: 1024
# features, 4 hidden layers of 1024 with LayerNorm and GELU, 10 classes,
# cross-entropy, AdamW lr 1e-3, batch 256; peer bench/torch_mlp_step.py) with
# --mlp-steps timed steps (default 20); mlp-decomposed, the same net with
# sgrt's LayerNorm and GELU built from elementwise ops and reductions
# (mlp_train --decomposed, as torch.onnx.export writes them below opset 17;
# the peers are the same); and resnet50 at each RESxBATCH of
# --configs (build/examples/resnet50_train, SGD lr 0.01 momentum 0.9, 1000
# classes; peers ../shared/bench/torch_resnet50_step.py in each layout of
# --layouts, the faster counting, and bench/torch_resnet50_compile.py in
# channels_last) with --steps timed steps (default 5). sgrt runs N+1 steps and
# reports the median after the first; each PyTorch peer times N steps after
# its warm-up (compile: 3 steps, compiling included). Each sgrt run gets an
# empty compile cache (SG_CACHE_DIR in a temporary folder), so its
# compile_seconds is a cold compile; so does each torch.compile run
# (TORCHINDUCTOR_CACHE_DIR). With --repeat N the runs of a workload
# alternate N times (fused and unfused in turn first) and each side keeps its
# fastest median (on a shared machine a run can only be slowed down).
# --quiet-load X waits (up to 10 minutes) before each run until the 1-minute
# load average is below X.
#
# Prints ms per step and peak RSS (/usr/bin/time's maximum resident set size;
# the JSON keeps each program's own figure too) of each side, the fusion
# speedup (unfused / fused ms), sgrt fused against each peer (peer ms / sgrt
# fused ms: > 1 is sgrt faster) and the targets of issue 17 (fusion speedup
# >= 1.3 on the MLP, >= 1.0 on ResNet-50). With --json the last line of stdout
# is one JSON object. Not a timed test: compare only ratios measured in one
# run, at a low load average.
set -euo pipefail

bench=fusion
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
steps=5
mlp_steps=20
threads=2
repeat=1
quiet=0
models="mlp mlp-decomposed resnet50"
configs="224x8 64x16"
peers="1.13 eager compile"
layouts="cl nchw"
json=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --mlp-steps) mlp_steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --quiet-load) quiet=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h | --help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "fusion: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$steps" "$mlp_steps" "$threads" "$repeat"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "fusion: --steps, --mlp-steps, --threads and --repeat take a positive integer, got '$n'" >&2; exit 2; }
done
for m in $models; do
  case $m in mlp | mlp-decomposed | resnet50) ;; *) echo "fusion: unknown model '$m' (mlp, mlp-decomposed, resnet50)" >&2; exit 2 ;; esac
done
for p in $peers; do
  case $p in 1.13 | eager | compile) ;; *) echo "fusion: unknown peer '$p' (1.13, eager, compile)" >&2; exit 2 ;; esac
done
for l in $layouts; do
  case $l in cl | nchw) ;; *) echo "fusion: unknown layout '$l' (cl, nchw)" >&2; exit 2 ;; esac
done
bench_progress
here=$repo/bench
mlp_bin=$build/examples/mlp_train
resnet_bin=$build/examples/resnet50_train
notes=()

# The sgrt programs, and the MLP options this bench needs (mlp_train prints
# its usage, which names every option, when it meets one it does not know).
has() { [[ " $1 " == *" $2 "* ]]; }
if has "$models" mlp; then
  [ -x "$mlp_bin" ] || { echo "fusion: no $mlp_bin; build first (cmake --build $build)" >&2; exit 1; }
  usage=$("$mlp_bin" --help 2>&1 || true)
  for opt in --layernorm --features --hidden --depth --activation --steps --optimizer; do
    [[ $usage == *"$opt"* ]] || { echo "fusion: mlp_train lacks $opt: rebuild (cmake --build $build) with the fusion work of issue 17" >&2; exit 1; }
  done
fi
if has "$models" resnet50; then
  [ -x "$resnet_bin" ] || { echo "fusion: no $resnet_bin; build first (cmake --build $build)" >&2; exit 1; }
  torch_resnet50_check
fi

# The PyTorch 2.x environment (bench/torch_venv.sh --check only looks).
venv_py=
if has "$peers" eager || has "$peers" compile; then
  if venv_py=$("$here/torch_venv.sh" --check 2> /dev/null | tail -n 1) && [ -x "$venv_py" ]; then
    :
  else
    venv_py=
    notes+=("no PyTorch 2.x environment: the eager and compile peers are skipped (create it with bench/torch_venv.sh)")
    say "note: ${notes[-1]}"
  fi
fi
runs=$(mktemp -d "${TMPDIR:-/tmp}/sgrt-fusion.XXXXXX")
trap 'rm -rf "$runs"' EXIT

# measure NAME CMD...: runs CMD under /usr/bin/time (maximum RSS), keeps the
# last line of its stdout in $runs/NAME.json and its stderr in $runs/NAME.err,
# and records its peak RSS in $runs/NAME.rss (kB). Returns CMD's status.
measure() {
  local name=$1 rc=0
  shift
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$runs/$name.rss" "$@" > "$runs/$name.out" 2> "$runs/$name.err" || rc=$?
  else
    "$@" > "$runs/$name.out" 2> "$runs/$name.err" || rc=$?
  fi
  tail -n 1 "$runs/$name.out" > "$runs/$name.json"
  return $rc
}

# sgrt_run NAME FUSION CMD...: one sgrt run with SG_FUSION=FUSION and an empty
# compile cache; ends the bench if the program fails (it is the thing measured).
sgrt_run() {
  local name=$1 fusion=$2
  shift 2
  wait_quiet
  mkdir -m 700 "$runs/cache-$name"
  say "\$ SG_FUSION=$fusion $*    # load average $(load1)"
  if ! measure "$name" env SG_FUSION="$fusion" SG_CACHE_DIR="$runs/cache-$name" "$@"; then
    echo "fusion: failed (SG_FUSION=$fusion): $*" >&2
    tail -n 5 "$runs/$name.err" >&2
    exit 1
  fi
  say "  $(cat "$runs/$name.json")"
}

# peer_run NAME CMD...: one PyTorch run; a failure is noted, not fatal.
peer_run() {
  local name=$1
  shift
  wait_quiet
  say "\$ $*    # load average $(load1)"
  if measure "$name" "$@" && grep -q '^{' "$runs/$name.json"; then
    say "  $(cat "$runs/$name.json")"
  else
    rm -f "$runs/$name.json"
    notes+=("$name failed: $(grep -v '^W[0-9]' "$runs/$name.err" | tail -n 1)")
    say "  failed: ${notes[-1]}"
  fi
}

# repetition W R: repetition R of workload W (mlp or resnet50-RESxBATCH); the
# caller sets sgrt_cmd, and mlp_args or res and batch.
repetition() {
  local w=$1 r=$2 order=(0 1) f p l side py_p mode
  [ $((r % 2)) = 1 ] && order=(1 0)
  for f in "${order[@]}"; do
    sgrt_run "$w.sgrt$f.$r" "$f" "${sgrt_cmd[@]}"
  done
  for p in $peers; do
    case $p in
      1.13) py_p=("$py") side=t113 ;;
      eager) [ -n "$venv_py" ] || continue; py_p=("$venv_py") side=$p ;;
      # A cold compile, as sgrt's: inductor's on-disk cache starts empty.
      compile) [ -n "$venv_py" ] || continue; py_p=(env "TORCHINDUCTOR_CACHE_DIR=$runs/inductor-$w.$r" "$venv_py") side=$p ;;
    esac
    if [[ $w == mlp* ]]; then
      mode=eager
      [ "$p" = compile ] && mode=compile
      peer_run "$w.$side.$r" "${py_p[@]}" "$here/torch_mlp_step.py" "${mlp_args[@]}" --steps "$mlp_steps" --threads "$threads" \
        --mode "$mode" --json
    elif [ "$p" = compile ]; then
      peer_run "$w.$side.$r" "${py_p[@]}" "$here/torch_resnet50_compile.py" "$res" "$batch" "$steps" "$threads" cl
    else
      for l in $layouts; do
        peer_run "$w.$side-$l.$r" "${py_p[@]}" "$torch_resnet50_peer" "$res" "$batch" "$steps" "$threads" "$l"
      done
    fi
  done
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average before: $load_before; $threads threads, best of $repeat; peers: $peers${venv_py:+ (2.x: $venv_py)}"
workloads=()
mlp_args=(--features 1024 --hidden 1024 --depth 4 --activation gelu --layernorm --batch 256)
for m in $models; do
  if [ "$m" = mlp ] || [ "$m" = mlp-decomposed ]; then
    workloads+=("$m")
    # mlp-decomposed: the same net with LayerNorm and GELU as elementwise ops
    # and reductions (as torch.onnx.export writes them below opset 17); the
    # PyTorch peers run nn.LayerNorm and nn.GELU either way.
    say "== $m 1024-1024x4-10, GELU + LayerNorm, AdamW, batch 256: $mlp_steps steps"
    sgrt_cmd=("$mlp_bin" "${mlp_args[@]}" --optimizer adamw --steps $((mlp_steps + 1)) --threads "$threads" --json)
    [ "$m" = mlp-decomposed ] && sgrt_cmd+=(--decomposed)
    for ((r = 0; r < repeat; r++)); do repetition "$m" "$r"; done
    continue
  fi
  for cfg in $configs; do
    res=${cfg%x*}
    batch=${cfg#*x}
    [[ $res =~ ^[0-9]+$ && $batch =~ ^[0-9]+$ ]] || { echo "fusion: config '$cfg' is not RESxBATCH" >&2; exit 2; }
    w=resnet50-$cfg
    workloads+=("$w")
    say "== ResNet-50 ${res}x${res}, batch $batch: $steps steps"
    sgrt_cmd=("$resnet_bin" --res "$res" --batch "$batch" --classes 1000 --steps $((steps + 1)) --warmup 1 --lr 0.01
      --threads "$threads" --json)
    for ((r = 0; r < repeat; r++)); do repetition "$w" "$r"; done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$py" - "$runs" "$json" "$threads" "$steps" "$mlp_steps" "$repeat" "$load_before" "$load_after" "${#notes[@]}" \
  "${notes[@]}" "${workloads[@]}" << 'EOF'
import glob, json, os, sys

runs, as_json = sys.argv[1], sys.argv[2] == "1"
threads, steps, mlp_steps, repeat = (int(a) for a in sys.argv[3:7])
load_before, load_after = sys.argv[7], sys.argv[8]
n_notes = int(sys.argv[9])
notes = sys.argv[10:10 + n_notes]
workloads = sys.argv[10 + n_notes:]
out = sys.stderr if as_json else sys.stdout
SIDES = ("sgrt0", "sgrt1", "t113", "eager", "compile")
NAMES = {"sgrt0": "sgrt unfused", "sgrt1": "sgrt fused", "t113": "torch 1.13", "eager": "torch 2.x eager",
         "compile": "torch 2.x compile"}
SGRT_KEYS = ("compile_seconds", "kernels_generated", "compiler_invocations", "cache_hits", "cache_misses")


def load(path):
    with open(path) as f:
        r = json.loads(f.read())
    rss = path[:-5] + ".rss"
    if os.path.exists(rss):  # /usr/bin/time's maximum RSS, in kB
        with open(rss) as f:
            r["rss_mb"] = int(f.read().split()[-1]) // 1024
    else:
        r["rss_mb"] = r.get("peak_rss_mb")
    return r


def best(w, side):
    """The fastest run of a side over the repetitions (and, for the eager
    ResNet-50 peers, over the layouts)."""
    rs = []
    for p in glob.glob(os.path.join(runs, "%s.%s*.json" % (w, side))):
        rest = os.path.basename(p)[len(w) + 1:]
        if rest.split(".")[0].split("-")[0] != side:
            continue
        try:
            rs.append(load(p))
        except (ValueError, OSError):
            pass
    rs = [r for r in rs if "ms_per_step" in r]
    return min(rs, key=lambda r: r["ms_per_step"]) if rs else None


rows = []
for w in workloads:
    row = {"workload": w}
    for s in SIDES:
        r = best(w, s)
        if r is None:
            row[s] = None
            continue
        d = {"ms_per_step": round(r["ms_per_step"], 3), "peak_rss_mb": r["rss_mb"],
             "own_peak_rss_mb": r.get("peak_rss_mb")}
        if s.startswith("sgrt"):
            d.update({k: round(r[k], 3) if isinstance(r[k], float) else r[k] for k in SGRT_KEYS if k in r})
        else:
            d.update({"version": r.get("version"), "warmup_seconds": r.get("warmup_seconds")})
            if "layout" in r:
                d["layout"] = r["layout"]
        row[s] = d
    un, fu = row["sgrt0"], row["sgrt1"]
    row["fusion_speedup"] = round(un["ms_per_step"] / fu["ms_per_step"], 3) if un and fu else None
    row["fused_vs"] = {s: round(row[s]["ms_per_step"] / fu["ms_per_step"], 3) if fu and row[s] else None
                       for s in ("t113", "eager", "compile")}
    need = 1.3 if w.startswith("mlp") else 1.0
    row["target_fusion_speedup"] = need
    row["target_met"] = None if row["fusion_speedup"] is None else row["fusion_speedup"] >= need
    rows.append(row)

if any(r["sgrt1"] and "kernels_generated" not in r["sgrt1"] for r in rows):
    notes.append("sgrt's JSON has no kernels_generated: a build from before the fusion pass, where SG_FUSION "
                 "changes nothing?")
f = lambda v, fmt="%.1f": "-" if v is None else fmt % v
ms = lambda row, s: row[s] and row[s]["ms_per_step"]
print("load average after: %s" % load_after, file=out)
print("\nms per step (best of %d; sgrt fused against each peer: peer ms / sgrt fused ms)" % repeat, file=out)
hdr = ("workload", "sgrt unfused", "sgrt fused", "fusion speedup (target)", "torch 1.13", "torch 2.x eager",
       "torch 2.x compile", "vs 1.13", "vs eager", "vs compile")
print("| " + " | ".join(hdr) + " |", file=out)
print("|" + "|".join("---" for _ in hdr) + "|", file=out)
for r in rows:
    lay = lambda s: " (%s)" % r[s]["layout"] if r[s] and "layout" in r[s] else ""
    print("| %s | %s | %s | %s (>= %.1f: %s) | %s%s | %s%s | %s | %s | %s | %s |" % (
        r["workload"], f(ms(r, "sgrt0")), f(ms(r, "sgrt1")), f(r["fusion_speedup"], "%.2fx"),
        r["target_fusion_speedup"], {True: "met", False: "NOT met", None: "not measured"}[r["target_met"]],
        f(ms(r, "t113")), lay("t113"), f(ms(r, "eager")), lay("eager"), f(ms(r, "compile")),
        *(f(r["fused_vs"][s], "%.2fx") for s in ("t113", "eager", "compile"))), file=out)
print("\npeak RSS MB, and compile seconds (sgrt: cold cache; torch compile: its warm-up steps)", file=out)
hdr = ("workload",) + tuple(NAMES[s] for s in SIDES) + ("sgrt compile s unfused / fused", "sgrt kernels generated",
                                                       "torch compile warm-up s")
print("| " + " | ".join(hdr) + " |", file=out)
print("|" + "|".join("---" for _ in hdr) + "|", file=out)
for r in rows:
    g = lambda s, k, fmt="%.2f": f(r[s] and r[s].get(k), fmt)
    print("| %s | %s | %s / %s | %s / %s | %s |" % (
        r["workload"], " | ".join(g(s, "peak_rss_mb", "%d") for s in SIDES),
        g("sgrt0", "compile_seconds"), g("sgrt1", "compile_seconds"),
        g("sgrt0", "kernels_generated", "%d"), g("sgrt1", "kernels_generated", "%d"),
        g("compile", "warmup_seconds", "%.1f")), file=out)
versions = sorted({r[s]["version"] for r in rows for s in ("t113", "eager", "compile") if r[s]})
if versions:
    print("\ntorch versions: %s" % ", ".join(versions), file=out)
for n in notes:
    print("note: %s" % n, file=out)
if as_json:
    print(json.dumps({"bench": "fusion", "threads": threads, "steps": steps, "mlp_steps": mlp_steps,
                      "repeat": repeat, "load_before": load_before, "load_after": load_after,
                      "workloads": rows, "notes": notes}))
EOF
