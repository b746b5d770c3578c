#!/usr/bin/env bash
# The GPU check (docs/cuda.md): run on a GPU machine with the bundle that
# scripts/gpu-bundle.sh made here. Under 6 minutes on an H200; writes every
# figure into one JSON file.
#
# usage: scripts/gpu-check.sh [BUNDLE]   (default build-gpu/gpu-bundle.tar.xz)
# Output: $OUT/gpu-check.json (or ./gpu-check-out/ without $OUT) and the
# logs beside it. Steps, each under its own time limit:
#   1. sgrt devices --json
#   2. test_cuda_gpu --json --dump: per-op parity with the CPU backend on
#      ResNet-50's shapes (fp32 and TF32), 5 training steps of two MLPs and
#      ResNet-50 (batch 32) against the CPU run, bitwise repeatability in
#      deterministic mode, a warm start without NVRTC
#   3. bench/cuda/torch_check.py: the same 5 ResNet-50 steps in PyTorch on
#      this GPU from sgrt's values; losses compared
#   4. throughput, ResNet-50 training at batch 256, 224 x 224: sgrt fp32 and
#      TF32; PyTorch eager fp32 and TF32, torch.compile TF32 (channels_last);
#      images/s and peak device memory (nvidia-smi's, sampled every 100 ms,
#      over the idle baseline, the same way for every run)
#   5. data parallelism on this one GPU (the host path: GPU -> host ->
#      allreduce -> GPU; NCCL refuses two ranks on one GPU): resnet50_dist
#      with 2 ranks on cuda against the same job on the CPU (losses and
#      parameter norms compared), then 3 ranks with a rank killed at step 3
#      and with a rank's device failed at step 3: the survivors heal and
#      finish
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bundle=${1:-build-gpu/gpu-bundle.tar.xz}
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
say() { echo "gpu-check: $*" | tee -a "$log"; }
[ -f "$bundle" ] || { say "no bundle $bundle (make it with scripts/gpu-bundle.sh)"; exit 1; }
work=$(mktemp -d)
tar -C "$work" -xJf "$bundle"
# CUDA's libraries: the toolkit's, then those of PyTorch's nvidia packages.
py=python3
cudalibs=$($py - <<'PYEOF' 2>/dev/null
import glob, os
try:
    import nvidia
    base = [os.path.dirname(p) for p in nvidia.__path__]
except Exception:
    base = []
dirs = []
for b in base:
    dirs += sorted(set(os.path.dirname(p) for p in glob.glob(b + "/**/lib*.so*", recursive=True)))
print(":".join(dirs))
PYEOF
)
export LD_LIBRARY_PATH=$work/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SG_CACHE_DIR=$work/cache
bin=$work/bin
missing=$(ldd "$bin/test_cuda_gpu" "$bin/resnet50_train" | grep "not found" | sort -u)
[ -z "$missing" ] || say "libraries not found: $missing"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$log" 2>&1

# mem_peak CMD...: runs CMD while sampling the GPU's used memory; prints the
# command's last stdout line (JSON) with "peak_device_memory_mb" added.
mem_peak() {
  local base samp pid rc
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
  [ -n "$base" ] || base=0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$work/mem" 2>/dev/null &
  samp=$!
  "$@" >"$work/run.out" 2>>"$log"
  rc=$?
  kill "$samp" 2>/dev/null
  wait "$samp" 2>/dev/null
  cat "$work/run.out" >>"$log"
  tail -n 1 "$work/run.out" | $py -c '
import json, sys
vals = []
for l in open(sys.argv[2]):
    try:
        vals.append(float(l))
    except ValueError:
        pass
base, peak = float(sys.argv[1]), max(vals or [0.0])
try:
    j = json.loads(sys.stdin.read())
except Exception:
    j = {"error": "no JSON line"}
j["peak_device_memory_mb"] = peak - base
j["exit_status"] = int(sys.argv[3])
print(json.dumps(j))' "$base" "$work/mem" "$rc"
}

results=$out/results.jsonl
: >"$results"
say "1. devices"
timeout 30 "$bin/sgrt" devices --json 2>>"$log" | tail -n 1 >>"$results"
say "2. test_cuda_gpu"
timeout 240 "$bin/test_cuda_gpu" --json --dump "$work/dump" >"$out/test_cuda_gpu.log" 2>&1
echo "test_cuda_gpu exit status $?" >>"$log"
tail -n 1 "$out/test_cuda_gpu.log" >>"$results"
say "3. PyTorch from sgrt's values"
PYTHONUNBUFFERED=1 timeout 90 $py bench/cuda/torch_check.py "$work/dump" >"$out/torch_check.log" 2>&1
tail -n 1 "$out/torch_check.log" >>"$results"
say "4. throughput"
for prec in fp32 tf32; do
  tf=0; [ $prec = tf32 ] && tf=1
  SG_CUDA_TF32=$tf mem_peak timeout 120 "$bin/resnet50_train" --device cuda --batch 256 --res 224 --classes 1000 \
    --steps 12 --warmup 4 --json | $py -c 'import json,sys; j=json.loads(sys.stdin.read()); j["precision"]=sys.argv[1]; print(json.dumps(j))' $prec >>"$results"
done
for run in "eager fp32" "eager tf32" "compile tf32"; do
  set -- $run
  mem_peak timeout 150 $py bench/cuda/torch_resnet.py "$1" "$2" 256 10 >>"$results"
done
say "5. data parallelism on one GPU"
# dist_run TAG TIMEOUT LAUNCH-ARGS...: a resnet50_dist job under sgrt launch; rank 0's JSON line, tagged.
dist_run() {
  local tag=$1 limit=$2 rc
  shift 2
  timeout "$limit" "$bin/sgrt" launch --label "$@" >"$out/dist_$tag.log" 2>&1
  rc=$?
  grep '^\[0\] {' "$out/dist_$tag.log" | tail -n 1 | sed 's/^\[0\] //' | $py -c '
import json, sys
try:
    j = json.loads(sys.stdin.read())
except Exception:
    j = {"error": "no JSON line"}
j["check"], j["launch_status"] = sys.argv[1], int(sys.argv[2])
print(json.dumps(j))' "$tag" "$rc" >>"$results"
}
dargs=(--batch 16 --res 64 --width 64 --classes 10 --steps 6 --warmup 2 --json)
dist_run dp2_cpu 240 -n 2 -- "$bin/resnet50_dist" "${dargs[@]}" --device cpu --threads 4
dist_run dp2_cuda 180 -n 2 -- "$bin/resnet50_dist" "${dargs[@]}" --device cuda
dist_run dp3_cuda_kill 180 --inject "kill:rank=1,step=3" -n 3 -- "$bin/resnet50_dist" "${dargs[@]}" --device cuda
dist_run dp3_cuda_device 180 --inject "device:rank=2,step=3" -n 3 -- "$bin/resnet50_dist" "${dargs[@]}" \
  --device cuda
$py - "$results" "$out/gpu-check.json" <<'PYEOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        rows.append(json.loads(line))
    except Exception:
        rows.append({"unparsed": line.strip()[:200]})
# Data parallelism on the GPU against the CPU: the same job, so the same losses and parameters up to
# the two backends' rounding.
by = {r.get("check"): r for r in rows if isinstance(r, dict) and "check" in r}
cpu, gpu = by.get("dp2_cpu", {}), by.get("dp2_cuda", {})
def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
rows.append({"check": "dp2_cuda_vs_cpu", "final_loss_rel": rel(gpu.get("final_loss"), cpu.get("final_loss")),
             "params_l2_rel": rel(gpu.get("params_l2"), cpu.get("params_l2"))})
json.dump({"gpu_check": rows}, open(sys.argv[2], "w"), indent=1)
print(json.dumps({"gpu_check": len(rows)}))
PYEOF
say "done: $out/gpu-check.json"
rm -rf "$work"
