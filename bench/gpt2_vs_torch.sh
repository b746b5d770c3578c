#!/usr/bin/env bash
# sgrt's GPT-2 training step against PyTorch's, side by side in one run
# (issue 21; docs/performance.md).
#
#   bench/gpt2_vs_torch.sh [--build DIR] [--preset tiny|mini] [--batch N] [--steps N]
#                          [--threads N] [--repeat N] [--quiet-load X] [--bf16] [--bf16-reference]
#                          [--json]
#
# With the same model (the mini preset by default: 6 layers, width 384,
# context 256; batch 4 x 256 tokens), thread count and AdamW:
#   - sgrt:          build/examples/gpt2_train --json (median ms/step over N
#                    steps after one warm-up step);
#   - PyTorch 1.13:  bench/torch_gpt2_step.py under Debian's /usr/bin/python3,
#                    eager;
#   - PyTorch 2.x:   the same under bench/torch_venv.sh's python, eager and
#                    torch.compile (skipped, with a note, when that environment
#                    does not exist);
# and prints tokens/s and peak RSS of each and sgrt's ratios to the fastest
# peer (> 1 is faster for tokens/s, < 1 is leaner for RSS). With --repeat N
# the runs alternate N times and each keeps its fastest median. --quiet-load X
# waits before each run until the 1-minute load average is below X.
# --bf16-reference also runs PyTorch 2 torch.compile with the forward under
# torch.autocast("cpu", torch.bfloat16): mixed precision (activations and
# attention in bf16 too), which sgrt does not have (its nearest is --bf16's
# bf16 products), so it is reported as a reference beside the tables, not as
# a peer of the ratios. --bf16 adds a second comparison, "bf16
# products", run in the same alternating loop: sgrt with --matmul-precision
# bf16 (each matmul operand rounded to bfloat16, the products summed in f32,
# every tensor f32) against PyTorch 2 torch.compile with its switch for the
# same arithmetic (bench/torch_gpt2_step.py --matmul-precision bf16), with its
# own ratios; the f32 rows and ratios stay as they are, since only peers of
# the same arithmetic compare. Where PyTorch's switch has no effect (x86
# without AMX: oneDNN stays f32) that peer is left out with a note, and so is
# sgrt's row where its session refuses bf16 (a CPU without bf16 dot products).
# With --json the last line is one JSON object (--bf16 adds keys ending in
# _matmul_bf16). Not a timed test: compare only the ratios of one run.
set -euo pipefail

bench=gpt2_vs_torch
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
steps=5
threads=2
repeat=1
quiet=0
preset=mini
batch=4
json=0
bf16=0
mm_bf16=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --quiet-load) quiet=$2; shift 2 ;;
    --json) json=1; shift ;;
    --bf16-reference) bf16=1; shift ;;
    --bf16) mm_bf16=1; shift ;;
    -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "$bench: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $preset in tiny | mini) ;; *) echo "$bench: --preset '$preset' is not tiny or mini" >&2; exit 2 ;; esac
sgrt_bin=$build/examples/gpt2_train
[ -x "$sgrt_bin" ] || { echo "$bench: no $sgrt_bin; build first (cmake --build $build)" >&2; exit 1; }
"$py" -c 'import torch' 2> /dev/null || { echo "$bench: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 1; }
bench_progress
notes=()
venv_py=
if venv_py=$("$here/torch_venv.sh" --check 2> /dev/null | tail -n 1) && [ -x "$venv_py" ]; then :; else
  venv_py=
  notes+=("no PyTorch 2.x environment: its eager and compile peers are skipped (create it with bench/torch_venv.sh)")
fi
peers="torch-1.13-eager${venv_py:+ torch-2-eager torch-2-compile}"
[ "$bf16" = 1 ] && [ -n "$venv_py" ] && peers+=" torch-2-compile-bf16"
# The bf16-products sides (--bf16): optional, so a failure drops the side with a note instead of ending the run.
mm_sides=
if [ "$mm_bf16" = 1 ]; then
  mm_sides="sgrt-matmul-bf16${venv_py:+ torch-2-compile-matmul-bf16}"
  [ -n "$venv_py" ] || notes+=("bf16 products: no PyTorch 2.x environment, so no peer")
fi
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg); GPT-2 $preset, batch $batch, $threads threads, $steps timed steps, best of $repeat; peers: $peers${mm_sides:+; bf16 products: $mm_sides}"
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
declare -A best_line dropped
sgrt_args=(--preset "$preset" --batch "$batch" --steps $((steps + 1)) --sample 0 --threads "$threads" --log-every 1000000 --json)
torch_args=(--preset "$preset" --batch "$batch" --steps "$steps" --threads "$threads" --json)
for ((r = 0; r < repeat; r++)); do
  wait_quiet
  # f32 said explicitly: the environment's SG_MATMUL_PRECISION must not turn the f32 row into bf16.
  line=$("$sgrt_bin" --matmul-precision f32 "${sgrt_args[@]}" 2> /dev/null | tail -n 1)
  say "sgrt:               $line"
  best_line[sgrt]+="$line"$'\n'
  for p in $peers $mm_sides; do
    [ -z "${dropped[$p]:-}" ] || continue
    wait_quiet
    case $p in
      torch-1.13-eager) cmd=("$py" "$here/torch_gpt2_step.py" --mode eager "${torch_args[@]}") ;;
      torch-2-eager) cmd=("$venv_py" "$here/torch_gpt2_step.py" --mode eager "${torch_args[@]}") ;;
      torch-2-compile) cmd=(env "TORCHINDUCTOR_CACHE_DIR=$runs/inductor-$r" "$venv_py" "$here/torch_gpt2_step.py" --mode compile "${torch_args[@]}") ;;
      torch-2-compile-bf16) cmd=(env "TORCHINDUCTOR_CACHE_DIR=$runs/inductor-bf16-$r" "$venv_py" "$here/torch_gpt2_step.py" --mode compile --autocast bf16 "${torch_args[@]}") ;;
      sgrt-matmul-bf16) cmd=("$sgrt_bin" --matmul-precision bf16 "${sgrt_args[@]}") ;;
      torch-2-compile-matmul-bf16) cmd=(env "TORCHINDUCTOR_CACHE_DIR=$runs/inductor-mm-bf16-$r" "$venv_py" "$here/torch_gpt2_step.py" --mode compile --matmul-precision bf16 "${torch_args[@]}") ;;
    esac
    case $p in
      *-matmul-bf16)
        if line=$("${cmd[@]}" 2> "$runs/stderr" | tail -n 1) && [[ $line == "{"* ]]; then :; else
          dropped[$p]=1
          why=$(grep -v '^ *$' "$runs/stderr" | tail -n 1)
          why=${why%.}
          notes+=("bf16 products: $p left out: ${why:-it failed with no message}.")
          say "$(printf '%-19s' "$p:") left out: ${why:-it failed with no message}"
          continue
        fi ;;
      *) line=$("${cmd[@]}" | tail -n 1) ;;
    esac
    say "$(printf '%-19s' "$p:") $line"
    best_line[$p]+="$line"$'\n'
  done
done
args=()
for k in sgrt $peers $mm_sides; do
  [ -z "${dropped[$k]:-}" ] && args+=("$k" "${best_line[$k]}")
done
"$py" - "$json" "$preset" "$batch" "$threads" "$steps" "$(cut -d' ' -f1-3 /proc/loadavg)" "${notes[*]:-}" "$mm_bf16" \
  "${args[@]}" <<'EOF'
import json, sys
as_json, preset, batch, threads, steps, load, notes = sys.argv[1] == "1", sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
mm_bf16 = sys.argv[8] == "1"
pairs = sys.argv[9:]
best = {}
for name, lines in zip(pairs[0::2], pairs[1::2]):
    rs = [json.loads(l) for l in lines.splitlines() if l.strip()]
    best[name] = min(rs, key=lambda r: r["ms_per_step"])
sg = best.pop("sgrt")
# bf16 products: their own comparison (sgrt's side may be missing where its session refused bf16).
sg_mm = best.pop("sgrt-matmul-bf16", None)
mm_peers = {k: best.pop(k) for k in list(best) if k.endswith("-matmul-bf16")}
refs = {k: best.pop(k) for k in list(best) if k.endswith("-bf16")}  # mixed precision: not a peer
fastest = min(best, key=lambda k: best[k]["ms_per_step"])
out = sys.stderr if as_json else sys.stdout
print("load average after: %s" % load, file=out)
print("| side | ms/step | tokens/s | peak RSS MB |", file=out)
print("|---|---|---|---|", file=out)
print("| sgrt | %.1f | %.0f | %.0f |" % (sg["ms_per_step"], sg["tokens_per_second"], sg["peak_rss_mb"]), file=out)
for k, r in best.items():
    print("| %s (%s) | %.1f | %.0f | %d |" % (k, r["version"], r["ms_per_step"], r["tokens_per_second"],
                                              r["peak_rss_mb"]), file=out)
speed = sg["tokens_per_second"] / best[fastest]["tokens_per_second"]
rss = sg["peak_rss_mb"] / best[fastest]["peak_rss_mb"]
print("sgrt / %s (the fastest peer): %.2fx the tokens/s at %.2fx the peak RSS" % (fastest, speed, rss), file=out)
for k, r in refs.items():
    print("reference, not a peer: %s (%s, bf16 autocast) %.1f ms/step, %.0f tokens/s, %d MB; sgrt (f32) is %.2fx its "
          "tokens/s" % (k, r["version"], r["ms_per_step"], r["tokens_per_second"], r["peak_rss_mb"],
                        sg["tokens_per_second"] / r["tokens_per_second"]), file=out)
    if sg_mm:
        print("  sgrt with bf16 products is %.2fx its tokens/s at %.2fx its peak RSS"
              % (sg_mm["tokens_per_second"] / r["tokens_per_second"], sg_mm["peak_rss_mb"] / r["peak_rss_mb"]),
              file=out)
mm = {}
if mm_bf16:
    mm_fastest = min(mm_peers, key=lambda k: mm_peers[k]["ms_per_step"]) if mm_peers else None
    mm = {"sgrt_matmul_bf16": sg_mm, "peers_matmul_bf16": mm_peers, "fastest_peer_matmul_bf16": mm_fastest,
          "speed_ratio_matmul_bf16": None, "rss_ratio_matmul_bf16": None, "sgrt_matmul_bf16_over_f32": None}
    print("bf16 products (each matmul operand rounded to bfloat16, sums and every tensor f32):", file=out)
    print("| side | ms/step | tokens/s | peak RSS MB |", file=out)
    print("|---|---|---|---|", file=out)
    if sg_mm:
        print("| sgrt, bf16 products | %.1f | %.0f | %.0f |" % (sg_mm["ms_per_step"], sg_mm["tokens_per_second"],
                                                             sg_mm["peak_rss_mb"]), file=out)
    for k, r in mm_peers.items():
        print("| %s (%s) | %.1f | %.0f | %d |" % (k, r["version"], r["ms_per_step"], r["tokens_per_second"],
                                                  r["peak_rss_mb"]), file=out)
    if sg_mm:
        mm["sgrt_matmul_bf16_over_f32"] = round(sg_mm["tokens_per_second"] / sg["tokens_per_second"], 3)
        print("sgrt with bf16 products: %.2fx its f32 tokens/s" % mm["sgrt_matmul_bf16_over_f32"], file=out)
    if sg_mm and mm_fastest:
        mm["speed_ratio_matmul_bf16"] = round(sg_mm["tokens_per_second"] / mm_peers[mm_fastest]["tokens_per_second"], 3)
        mm["rss_ratio_matmul_bf16"] = round(sg_mm["peak_rss_mb"] / mm_peers[mm_fastest]["peak_rss_mb"], 3)
        print("sgrt / %s (the fastest peer with bf16 products): %.2fx the tokens/s at %.2fx the peak RSS"
              % (mm_fastest, mm["speed_ratio_matmul_bf16"], mm["rss_ratio_matmul_bf16"]), file=out)
    else:
        print("no ratio with bf16 products: %s (see the note)"
              % ("no PyTorch peer has them here" if sg_mm else "sgrt did not run them"), file=out)
if notes:
    print("note: " + notes, file=out)
if as_json:
    print(json.dumps({"bench": "gpt2_vs_torch", "preset": preset, "batch": batch, "threads": threads,
                      "steps": steps, "load_after": load, "sgrt": sg, "peers": best, "fastest_peer": fastest,
                      "speed_ratio": round(speed, 3), "rss_ratio": round(rss, 3), "references": refs,
                      "notes": notes, **mm}))
EOF
