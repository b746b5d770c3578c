#!/usr/bin/env bash
# A job across "nodes" the way a cluster launcher starts it (docs/dist.md
# "Launchers"): NODES network namespaces joined by veth pairs to a bridge, so
# ranks on different nodes talk over TCP and only rank 0's node serves the
# rendezvous store (MASTER_ADDR is its address, not loopback). Each node runs
# PER_NODE ranks with the variables of STYLE:
#   slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID   (what srun sets)
#   openmpi   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK    (what mpirun sets)
#   torchrun  RANK, WORLD_SIZE, LOCAL_RANK                (what torchrun sets)
# plus MASTER_ADDR, MASTER_PORT and SG_JOB_TOKEN, as docs/dist.md tells users
# to export them. Ranks are numbered node by node (rank = node * PER_NODE +
# local rank). UCX runs over TCP on the node's veth only (UCX_TLS=tcp,
# UCX_NET_DEVICES): namespaces on one machine still share memory, so without
# this UCX would pick shared memory between the "nodes" and hide what a real
# second host would exercise.
#
#   netns_nodes.sh STYLE NODES PER_NODE -- COMMAND [ARGS...]
#
# Exit: 0 when every rank exits 0; 77 (skip) without root, namespaces, veth or
# bridges; 124 when a rank runs past 90 s; else 1. Everything created is
# removed on every exit path; only processes started here are killed.
set -u
[ $# -ge 5 ] && [ "$4" = "--" ] || { echo "usage: $0 slurm|openmpi|torchrun NODES PER_NODE -- COMMAND [ARGS...]" >&2; exit 2; }
style=$1 nodes=$2 per=$3
shift 4
case $style in
  slurm) vr=SLURM_PROCID vs=SLURM_NTASKS vl=SLURM_LOCALID ;;
  openmpi) vr=OMPI_COMM_WORLD_RANK vs=OMPI_COMM_WORLD_SIZE vl=OMPI_COMM_WORLD_LOCAL_RANK ;;
  torchrun) vr=RANK vs=WORLD_SIZE vl=LOCAL_RANK ;;
  *) echo "netns_nodes: unknown style '$style' (slurm, openmpi, torchrun)" >&2; exit 2 ;;
esac
# shellcheck source=tests/netns/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
hub=sgm$tag node_ns=sgm$tag- node_if=sgw$tag- hub_if=sgx$tag- subnet=10.78.1
netns_begin nodes "$nodes"
master=10.78.1.10
port=$((29600 + tag % 300))
token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
n=$((nodes * per))
workers=()
for ((i = 0; i < nodes; i++)); do
  for ((l = 0; l < per; l++)); do
    r=$((i * per + l))
    "$in_netns" "$node_ns$i" env "$vr=$r" "$vs=$n" "$vl=$l" MASTER_ADDR=$master MASTER_PORT=$port \
      SG_JOB_TOKEN=$token UCX_TLS=tcp UCX_NET_DEVICES="$node_if$i" "$@" > >(sed -u "s/^/[node $i rank $r] /") 2>&1 &
    pids+=($!)
    workers+=($!)
  done
done
start=$(date +%s)
ok=1
for ((r = 0; r < n; r++)); do
  netns_wait "${workers[$r]}" "$r" 90
  [ $rc = 0 ] || { echo "FAIL: rank $r exited with status $rc" >&2; ok=0; }
done
[ $ok = 1 ] && echo "netns_nodes: $n ranks on $nodes nodes ($style variables) completed"
[ $ok = 1 ]
