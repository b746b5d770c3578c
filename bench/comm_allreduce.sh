#!/usr/bin/env bash
# Side-by-side allreduce comparison (SPEC M3 targets): `sgrt bench allreduce`
# against Open MPI, gloo and the ucx_perftest tag-bandwidth ceiling, all on this
# machine. Each round runs sgrt and its peers back to back for one
# configuration; a shared machine's load changes from minute to minute, so the
# ratios are taken within a round and the table shows the median over rounds
# (busbw in GB/s, nccl-tests definition; every round's figures follow).
#
#   usage: bench/comm_allreduce.sh [--sgrt BINARY] [--rounds R] [--np "2 4"] [--mib "1 16 64"] [--iters I]
#   (defaults: build/tools/sgrt, 3 rounds, 2 and 4 ranks, 1/16/64 MiB, 20 iterations)
# Needs openmpi-bin libopenmpi-dev python3-torch ucx-utils (not test deps);
# the peers' scripts are in ../shared/bench (SG_PEER_BENCH overrides).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
peer=${SG_PEER_BENCH:-$here/../../shared/bench}
sgrt=$here/../build/tools/sgrt
rounds=3 nps="2 4" mibs="1 16 64" iters=20
while [ $# -gt 0 ]; do
  case $1 in
    --sgrt) sgrt=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --np) nps=$2; shift ;;
    --mib) mibs=$2; shift ;;
    --iters) iters=$2; shift ;;
    *) sed -n '2,12s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
  esac
  shift
done
py=/usr/bin/python3
# field KEY: the KEY of the last JSON line on stdin, or "nan".
field() { $py -c "import json,sys
try: print(float(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1']))
except Exception: print('nan')" 2>/dev/null; }
# median and per-round ratios over space-separated lists.
stats() { $py - "$@" <<'EOF'
import math, statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ok = [x / y for x, y in zip(a, b) if not math.isnan(x) and not math.isnan(y) and y > 0]
print('%.2fx' % statistics.median(ok) if ok else 'n/a')
EOF
}
med() { $py -c "import math,statistics,sys; v=[float(x) for x in sys.argv[1].split() if not math.isnan(float(x))]; print('%.2f' % statistics.median(v) if v else 'n/a')" "$1"; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; sgrt: $sgrt"
echo
echo "| ranks | MiB | sgrt busbw | Open MPI busbw | gloo busbw | sgrt / MPI | sgrt / gloo | rounds (sgrt/MPI/gloo) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for np in $nps; do
  for mib in $mibs; do
    b=$((mib << 20)) s="" m="" g="" detail=""
    for ((r = 0; r < rounds; r++)); do
      sv=$("$sgrt" bench allreduce -n "$np" --bytes "$b" --iters "$iters" --json | field busbw_gbs)
      mv=$(bash "$peer/mpi_allreduce.sh" "$np" "$b" "$iters" 2>/dev/null | field busbw_gbs)
      gv=$($py "$peer/gloo_allreduce.py" "$np" "$b" "$iters" 2>/dev/null | field busbw_gbs)
      s="$s $sv" m="$m $mv" g="$g $gv" detail="$detail $sv/$mv/$gv"
    done
    echo "| $np | $mib | $(med "$s") | $(med "$m") | $(med "$g") | $(stats "$s" "$m") | $(stats "$s" "$g") |$detail |"
  done
done
echo
echo "ucx_perftest tag bandwidth between 2 processes against sgrt's 2-rank allreduce algbw (median of per-round ratios):"
for mib in 16 64; do
  b=$((mib << 20)) u="" a=""
  for ((r = 0; r < rounds; r++)); do
    u="$u $(bash "$peer/ucx_bandwidth.sh" "$b" 2>/dev/null | field tag_bw_gbs)"
    a="$a $("$sgrt" bench allreduce -n 2 --bytes "$b" --iters "$iters" --json | field algbw_gbs)"
  done
  echo "- $mib MiB: ucx_perftest tag_bw $(med "$u") GB/s, sgrt algbw $(med "$a") GB/s, sgrt / ucx_perftest $(stats "$a" "$u") (rounds: ucx$u; sgrt$a)"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
