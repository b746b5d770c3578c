#!/usr/bin/env bash
# Checks of examples/resnet50/resnet50_dist (data parallel, 2 local ranks):
#   offload SGRT BIN   optimizer state kept in the DRAM and in the PMEM tier of
#                      the global page table (a file in a temporary directory)
#                      gives parameters bit-identical to the run without
#                      offload: the three params_hash digests are equal, and
#                      the offloaded runs report their state in the tier.
set -euo pipefail
mode=${1:-}
sgrt=${2:-}
bin=${3:-}
[ "$mode" = offload ] && [ -x "$sgrt" ] && [ -x "$bin" ] || {
  echo "usage: check_resnet50_dist.sh offload SGRT BIN" >&2
  exit 2
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
hash_of() {
  "$sgrt" launch -n 2 -- "$bin" --steps 3 --res 32 --width 8 --batch 2 --json "$@" >"$dir/out" 2>&1 || {
    cat "$dir/out" >&2
    exit 1
  }
  # The JSON summary is rank 0's last line: "[0] {...}".
  sed -n 's/^\[0\] \({.*}\)$/\1/p' "$dir/out" | tail -n 1 |
    /usr/bin/python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); print(d["params_hash"], d["offload_bytes"])'
}
read -r plain plain_bytes < <(hash_of)
read -r dram dram_bytes < <(hash_of --offload dram)
read -r pmem pmem_bytes < <(hash_of --offload pmem --offload-path "$dir")
echo "params_hash: no offload $plain ($plain_bytes B offloaded), DRAM tier $dram ($dram_bytes B)," \
  "PMEM tier $pmem ($pmem_bytes B)"
[ -n "$plain" ] && [ "$plain" = "$dram" ] && [ "$plain" = "$pmem" ] || {
  echo "FAIL: offloading optimizer state changed the parameters" >&2
  exit 1
}
[ "$plain_bytes" = 0 ] && [ "$dram_bytes" != 0 ] && [ "$dram_bytes" = "$pmem_bytes" ] || {
  echo "FAIL: the offloaded runs do not report their optimizer state in a tier" >&2
  exit 1
}
