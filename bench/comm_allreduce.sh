#!/usr/bin/env bash
# Side-by-side allreduce comparison (SPEC M3 targets): `sgrt bench allreduce`
# against Open MPI, gloo and the ucx_perftest tag-bandwidth ceiling, for 2 and
# 4 ranks at 1, 16 and 64 MiB, all in one run on this machine. Prints a
# Markdown table (busbw in GB/s, nccl-tests definition).
#   usage: bench/comm_allreduce.sh [SGRT_BINARY]   (default build/tools/sgrt)
# Needs openmpi-bin libopenmpi-dev python3-torch ucx-utils (not test deps).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
peer=${SG_PEER_BENCH:-$here/../../shared/bench}
sgrt=${1:-$here/../build/tools/sgrt}
py=/usr/bin/python3
field() { $py -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('%.2f' % float(d$1))" 2>/dev/null || echo "n/a"; }

echo "| ranks | MiB | sgrt busbw | Open MPI busbw | gloo busbw | sgrt / MPI | sgrt / gloo |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for np in 2 4; do
  for mib in 1 16 64; do
    b=$((mib << 20))
    s=$("$sgrt" bench allreduce -n $np --bytes $b --iters 20 --json | field "['busbw_gbs']")
    m=$(bash "$peer/mpi_allreduce.sh" $np $b 2>/dev/null | field "['busbw_gbs']")
    g=$($py "$peer/gloo_allreduce.py" $np $b 2>/dev/null | field "['busbw_gbs']")
    ratio() { $py -c "print('%.2fx' % ($1/$2))" 2>/dev/null || echo "n/a"; }
    echo "| $np | $mib | $s | $m | $g | $(ratio $s $m) | $(ratio $s $g) |"
  done
done
echo
echo "ucx_perftest tag bandwidth (2 processes), and sgrt's 2-rank algbw as a fraction of it:"
for mib in 16 64; do
  b=$((mib << 20))
  u=$(bash "$peer/ucx_bandwidth.sh" $b 2>/dev/null | tail -1)
  a=$("$sgrt" bench allreduce -n 2 --bytes $b --iters 20 --json | field "['algbw_gbs']")
  echo "- $mib MiB: ucx_perftest $u ; sgrt algbw $a GB/s"
done
