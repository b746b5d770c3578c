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
skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
tag=$$
hub="sgb$tag"
dir=$(mktemp -d "${TMPDIR:-/tmp}/sg-netns-heal.XXXXXX") || exit 1
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
  wait 2> /dev/null
  for ((i = 0; i <= n; i++)); do ip netns del "sgn$tag-$i" 2> /dev/null; done
  ip netns del "$hub" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$hub" 2> "$dir/err" || skip "cannot create a network namespace: $(cat "$dir/err")"
ip -n "$hub" link add br0 type bridge 2> "$dir/err" || skip "cannot create a bridge: $(cat "$dir/err")"
ip -n "$hub" link set br0 up
# Node i < n is rank i; node n is the store.
for ((i = 0; i <= n; i++)); do
  ns="sgn$tag-$i"
  ip netns add "$ns" && ip link add "sgv$tag-$i" type veth peer name "sgh$tag-$i" 2> "$dir/err" ||
    skip "cannot create a veth pair: $(cat "$dir/err")"
  ip link set "sgv$tag-$i" netns "$ns" && ip link set "sgh$tag-$i" netns "$hub" &&
    ip -n "$hub" link set "sgh$tag-$i" master br0 && ip -n "$hub" link set "sgh$tag-$i" up &&
    ip -n "$ns" addr add "10.77.1.$((10 + i))/24" dev "sgv$tag-$i" && ip -n "$ns" link set lo up &&
    ip -n "$ns" link set "sgv$tag-$i" up || {
    echo "FAIL: cannot set up $ns" >&2
    exit 1
  }
done
store_addr=10.77.1.$((10 + n))
port=29588
token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
ip netns exec "sgn$tag-$n" env SG_STORE_ADDR=$store_addr MASTER_PORT=$port SG_JOB_TOKEN=$token "$store_bin" \
  > >(sed -u "s/^/[store] /") 2>&1 &
pids+=($!)
workers=()
for ((i = 0; i < n; i++)); do
  ip netns exec "sgn$tag-$i" env SG_RANK=$i SG_WORLD_SIZE=$n SG_LOCAL_RANK=$i MASTER_ADDR=$store_addr \
    MASTER_PORT=$port SG_JOB_TOKEN=$token SG_STORE_EXTERNAL=1 UCX_TLS=tcp UCX_NET_DEVICES="sgv$tag-$i" \
    "$@" > >(sed -u "s/^/[$i] /") 2>&1 &
  pids+=($!)
  workers+=($!)
done
(
  sleep "$down"
  ip -n "sgn$tag-$victim" link set "sgv$tag-$victim" down
  ip -n "$hub" link set "sgh$tag-$victim" down
  echo "[netns] link of rank $victim down at $(date +%s%3N)"
) &
pids+=($!)
start=$(date +%s)
ok=1
for ((i = 0; i < n; i++)); do
  p=${workers[$i]}
  while kill -0 "$p" 2> /dev/null; do
    if [ $(($(date +%s) - start)) -ge 60 ]; then
      echo "FAIL: rank $i still running after 60 s (hung?)" >&2
      exit 124
    fi
    sleep 0.1
  done
  wait "$p"
  rc=$?
  echo "[netns] rank $i exited with status $rc"
  if [ "$i" = "$victim" ]; then
    [ $rc != 0 ] || { echo "FAIL: rank $victim, cut off, finished as if nothing happened" >&2; ok=0; }
  else
    [ $rc = 0 ] || ok=0
  fi
done
[ $ok = 1 ] && echo "netns_heal: the job completed on the ranks other than $victim after its link went down"
[ $ok = 1 ]
