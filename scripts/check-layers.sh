#!/usr/bin/env bash
# Checks that the code under src/ keeps to the layer picture of
# docs/architecture.md: its first code block lists the folders of src/ from
# the top layer down (lines " src/NAME ..."). For every #include in src/:
#   - a folder includes headers of its own folder or of folders below it,
#     never above (the include graph between folders is then acyclic);
#   - another folder's private header (*_internal.h) is never included: the
#     layers above reach a folder through its layer header (e.g. graph/graph.h)
#     or the public API (include/sgrt);
#   - a public header "sgrt/X.h" counts as the layer that implements it.
# Prints each violation as FILE:LINE: what; exits 1 if there is one, 0 if
# not, 2 when the picture cannot be read. CI runs it (ctest: layers).
#
# usage: scripts/check-layers.sh [REPO]
set -u
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$repo/docs/architecture.md
[ -f "$doc" ] || { echo "check-layers: no $doc" >&2; exit 2; }

# The folders, top first, from the first code block of the document.
mapfile -t layers < <(awk '/^```/ {n++; next} n == 1 && /^ src\/[a-z_]+/ {sub(/^ src\//, ""); print $1}' "$doc")
[ ${#layers[@]} -ge 2 ] || { echo "check-layers: no layer list in $doc" >&2; exit 2; }
declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$((${#layers[@]} - i)); done # higher is above
for d in "$repo"/src/*/; do
  f=$(basename "$d")
  [ -n "${rank[$f]:-}" ] || { echo "check-layers: src/$f is not in the layer picture of docs/architecture.md"; bad=1; }
done

# Public headers and the layer that implements each.
declare -A public=(
  [core.h]=core [status.h]=core [export.h]=core [graph.h]=graph [ops.h]=graph [train.h]=graph [sgg.h]=graph
  [onnx.h]=onnx [devices.h]=backend [session.h]=runtime [partition.h]=partition [comm.h]=comm [gmem.h]=gmem [health.h]=health
  [dist.h]=parallel [offload.h]=parallel [cache.h]=compile
)

bad=${bad:-0}
while IFS= read -r -d '' file; do
  rel=${file#"$repo"/}
  from=$(cut -d/ -f2 <<<"$rel")
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([a-z_]+)/([A-Za-z0-9_./]+)\" ]] || continue
    dir=${BASH_REMATCH[1]} hdr=${BASH_REMATCH[2]}
    if [ "$dir" = sgrt ]; then
      [ "$hdr" = sgrt.h ] && { echo "$rel:$n: includes sgrt/sgrt.h (the umbrella header is for programs)"; bad=1; continue; }
      to=${public[$hdr]:-}
      [ -n "$to" ] || { echo "$rel:$n: includes sgrt/$hdr, a public header the picture does not place"; bad=1; continue; }
    else
      to=$dir
      [ -n "${rank[$to]:-}" ] || { echo "$rel:$n: includes $dir/$hdr from a folder the picture does not list"; bad=1; continue; }
      if [ "$to" != "$from" ] && [[ $hdr == *_internal.h ]]; then
        echo "$rel:$n: includes $dir/$hdr, another folder's private header"
        bad=1
      fi
    fi
    [ "$to" = "$from" ] && continue
    if [ -z "${rank[$from]:-}" ] || [ -z "${rank[$to]:-}" ] || [ "${rank[$to]}" -ge "${rank[$from]}" ]; then
      echo "$rel:$n: src/$from includes a header of src/$to, which is not below it (docs/architecture.md)"
      bad=1
    fi
  done < "$file"
done < <(find "$repo/src" -name '*.[ch]' -print0 | sort -z)

if [ "$bad" = 0 ]; then
  echo "check-layers: src/ keeps to the layers of docs/architecture.md: ${layers[*]} (top first)"
fi
exit "$bad"
