#!/usr/bin/env bash
# gpt2_parity_<preset>: PyTorch's side (gpt2_ref.py, Debian's /usr/bin/python3 with torch 1.13; exit 77,
# skipped, without it), then sgrt's (gpt2_parity), which exits 1 when a bar is missed.
#   usage: run_parity.sh GPT2_PARITY DIR PRESET [gpt2_ref.py options]
set -euo pipefail
bin=$1 dir=$2 preset=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
rc=0
/usr/bin/python3 "$here/gpt2_ref.py" "$dir" --preset "$preset" "$@" || rc=$?
[ "$rc" = 0 ] || exit "$rc"
# GPT2_PARITY_ARGS: sgrt's side's options (--fused-attention).
"$bin" "$dir" --threads 2 --json ${GPT2_PARITY_ARGS:-}
