#!/usr/bin/env bash
# A real link cut in a healing job (SPEC H6, docs/resilience.md): N ranks,
# each in its own network namespace, plus the rendezvous store in another,
# all joined by veth pairs to a bridge in a hub namespace (UCX over TCP).
# After DOWN seconds the link of rank VICTIM is taken down; the others must
# detect it, agree without it and finish the job (exit 0), and the victim
# must stop with an error (it can reach neither its peers nor the store).
#
#   netns_heal.sh N VICTIM DOWN STORE_BIN -- COMMAND [ARGS...]
#
# Each rank runs COMMAND with SG_RANK, SG_WORLD_SIZE, MASTER_ADDR (the store),
# MASTER_PORT, SG_JOB_TOKEN, SG_STORE_EXTERNAL=1, UCX_TLS=tcp and
# UCX_NET_DEVICES (its veth). Exit: 0 as above; 77 (skip) without root,
# namespaces, veth or bridges; 124 on timeout (60 s); else 1. Everything
# created is removed on every exit path; only processes started here are killed.
set -u
[ $# -ge 6 ] && [ "$5" = "--" ] || { echo "usage: $0 N VICTIM DOWN STORE_BIN -- COMMAND [ARGS...]" >&2; exit 2; }
n=$1 victim=$2 down=$3 store_bin=$4
shift 5
# shellcheck source=tests/netns/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Node i < n is rank i; node n is the store.
hub=sgb$tag node_ns=sgn$tag- node_if=sgv$tag- hub_if=sgh$tag- subnet=10.77.1
netns_begin heal $((n + 1))
store_addr=10.77.1.$((10 + n))
port=29588
token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
"$in_netns" "$node_ns$n" env SG_STORE_ADDR=$store_addr MASTER_PORT=$port SG_JOB_TOKEN=$token "$store_bin" \
  > >(sed -u "s/^/[store] /") 2>&1 &
pids+=($!)
workers=()
for ((i = 0; i < n; i++)); do
  "$in_netns" "$node_ns$i" env SG_RANK=$i SG_WORLD_SIZE=$n SG_LOCAL_RANK=$i MASTER_ADDR=$store_addr \
    MASTER_PORT=$port SG_JOB_TOKEN=$token SG_STORE_EXTERNAL=1 UCX_TLS=tcp UCX_NET_DEVICES="$node_if$i" \
    "$@" > >(sed -u "s/^/[$i] /") 2>&1 &
  pids+=($!)
  workers+=($!)
done
(
  sleep "$down"
  ns_ip "$node_ns$victim" link set "$node_if$victim" down
  ns_ip "$hub" link set "$hub_if$victim" down
  echo "[netns] link of rank $victim down at $(date +%s%3N)"
) &
pids+=($!)
start=$(date +%s)
ok=1
for ((i = 0; i < n; i++)); do
  netns_wait "${workers[$i]}" "$i" 60
  echo "[netns] rank $i exited with status $rc"
  if [ "$i" = "$victim" ]; then
    [ $rc != 0 ] || { echo "FAIL: rank $victim, cut off, finished as if nothing happened" >&2; ok=0; }
  else
    [ $rc = 0 ] || ok=0
  fi
done
[ $ok = 1 ] && echo "netns_heal: the job completed on the ranks other than $victim after its link went down"
[ $ok = 1 ]
