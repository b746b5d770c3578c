#!/usr/bin/env bash
# The demo: installs missing dependencies, builds sgrt, and runs the most
# complete example there is. Today that is examples/build_graph (build a CNN
# with the builder API, save it as .sgg, load it back), followed by
# `sgrt inspect` and `sgrt dot` on the file it wrote.
#
# usage: scripts/demo.sh [-j N]
set -euo pipefail

cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
  case $1 in
    -j) [ $# -ge 2 ] || { echo "usage: scripts/demo.sh [-j N]" >&2; exit 2; }; jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' (usage: scripts/demo.sh [-j N])" >&2; exit 2 ;;
  esac
  shift
done

bash scripts/install-deps.sh
echo "=== build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs" --target sgrt_cli build_graph

out=build/demo
mkdir -p "$out"
echo
echo "=== examples/build_graph --json $out/model.sgg"
build/examples/build_graph --json "$out/model.sgg"
echo
echo "=== sgrt inspect $out/model.sgg"
build/tools/sgrt inspect "$out/model.sgg"
echo
echo "=== sgrt verify $out/model.sgg"
build/tools/sgrt verify "$out/model.sgg"
build/tools/sgrt dot "$out/model.sgg" -o "$out/model.dot"
if command -v dot >/dev/null; then
  dot -Tsvg "$out/model.dot" -o "$out/model.svg"
  echo "graph drawn: $out/model.svg (DOT source: $out/model.dot)"
else
  echo "DOT source: $out/model.dot"
fi
