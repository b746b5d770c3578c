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
# to export them; or
#   sgrt      one `sgrt launch --nnodes NODES --node-rank I --master-addr A
#             --master-port P -n PER_NODE` per node (SGRT: the sgrt binary),
#             SG_JOB_TOKEN exported; node 0's launcher hosts the store. With
#             NETNS_JSON=1 the last line of node 0's standard output must be
#             the program's JSON summary with world_size NODES * PER_NODE and
#             the params_hash of the same job run by one launcher on loopback.
# Ranks are numbered node by node (rank = node * PER_NODE + local rank). UCX runs over TCP on the node's veth only (UCX_TLS=tcp,
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
  sgrt) [ -x "${SGRT:-}" ] || { echo "netns_nodes: style sgrt needs SGRT=path/to/sgrt" >&2; exit 2; } ;;
  *) echo "netns_nodes: unknown style '$style' (slurm, openmpi, torchrun, sgrt)" >&2; exit 2 ;;
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
if [ "$style" = sgrt ]; then
  for ((i = 0; i < nodes; i++)); do
    "$in_netns" "$node_ns$i" env SG_JOB_TOKEN=$token UCX_TLS=tcp UCX_NET_DEVICES="$node_if$i" \
      "$SGRT" launch --nnodes "$nodes" --node-rank $i --master-addr $master --master-port $port -n "$per" -- "$@" \
      > >(tee "$dir/node$i.out" | sed -u "s/^/[node $i] /") 2> >(sed -u "s/^/[node $i] /" >&2) &
    pids+=($!)
    workers+=($!)
  done
  start=$(date +%s)
  ok=1
  for ((i = 0; i < nodes; i++)); do
    netns_wait "${workers[$i]}" "node $i" 90
    [ $rc = 0 ] || { echo "FAIL: the launcher of node $i exited with status $rc" >&2; ok=0; }
  done
  if [ $ok = 1 ] && [ "${NETNS_JSON:-0}" = 1 ]; then
    sleep 0.2 # the tee behind node 0's output
    # The reference: the same job on one node (loopback, shared memory), whose parameters must be the same.
    "$SGRT" launch -n $((nodes * per)) -- "$@" 2>/dev/null | tail -n 1 >"$dir/ref.json"
    tail -n 1 "$dir/node0.out" | /usr/bin/python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
ref = json.load(open(sys.argv[2]))
assert j["world_size"] == int(sys.argv[1]), j["world_size"]
assert j["params_hash"] == ref["params_hash"], (j["params_hash"], ref["params_hash"])
print("netns_nodes: the last line of node 0 is the JSON summary of a %d-rank job, params_hash %s as on one node" % (j["world_size"], j["params_hash"]))' \
      $((nodes * per)) "$dir/ref.json" ||
      { echo "FAIL: node 0's last line is not the expected JSON summary: $(tail -n 1 "$dir/node0.out")" >&2; ok=0; }
  fi
  [ $ok = 1 ] && echo "netns_nodes: $n ranks on $nodes nodes (sgrt launch --nnodes $nodes) completed"
  [ $ok = 1 ]
  exit
fi
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
