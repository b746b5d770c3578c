#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, for tests that need a real
# link between two ranks that can be cut (SPEC H6: "cut the link between two
# ranks"). docs/resilience.md describes it.
#
#   netns.sh [--down-after SECONDS] [--timeout SECONDS] [--] COMMAND [ARGS...]
#
# Creates namespaces sgh<pid>-0 (10.77.0.1/24) and sgh<pid>-1 (10.77.0.2/24)
# joined by veth sgv<pid>a / sgv<pid>b, and runs COMMAND once in each, as
# rank 0 and rank 1 of a two-rank job:
#   SG_RANK, SG_WORLD_SIZE=2, MASTER_ADDR=10.77.0.1, MASTER_PORT (29577
#   unless set), UCX_TLS (tcp unless set), UCX_NET_DEVICES (the veth end),
#   SG_NETNS_INDEX (0 or 1), SG_NETNS_DEV, SG_NETNS_ADDR, SG_NETNS_PEER_ADDR,
#   SG_NETNS_CUT_FILE (where the cut time is written, see below).
# Output lines are prefixed with [ns0] / [ns1].
#
# --down-after S  takes both ends of the link down S seconds after the
#                 commands start (`ip link set DEV down`); just before, the
#                 wall-clock time in ms since the epoch is taken, and written
#                 to SG_NETNS_CUT_FILE once the link is down.
# --timeout S     kills the commands after S seconds (default 60) and fails.
#
# Exit status: 0 when both commands exit 0; 77 (skip) when not root or
# network namespaces or veth pairs are unavailable; 124 on timeout; else the
# first failing command's status. The namespaces, the link and the temporary
# directory are removed on every exit path.
set -u

down_after=""
timeout=60
usage() {
  echo "usage: $0 [--down-after SECONDS] [--timeout SECONDS] [--] COMMAND [ARGS...]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --down-after) [ $# -ge 2 ] || usage; down_after=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
case "$timeout" in '' | *[!0-9]*) echo "--timeout '$timeout' is not a whole number of seconds" >&2; exit 2 ;; esac
case "$down_after" in *[!0-9.]*) echo "--down-after '$down_after' is not a number of seconds" >&2; exit 2 ;; esac

skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
ip netns list > /dev/null 2>&1 || skip "'ip netns' is unavailable"

# shellcheck source=tests/netns/nsexec.sh
. "$(dirname "${BASH_SOURCE[0]}")/nsexec.sh"
tag=$$
ns=("sgh$tag-0" "sgh$tag-1")
dev=("sgv${tag}a" "sgv${tag}b")
addr=(10.77.0.1 10.77.0.2)
dir=$(mktemp -d "${TMPDIR:-/tmp}/sg-netns.XXXXXX") || exit 1
pids=()

# Kills only what this script started, by pid, then removes the namespaces
# (which takes the veth pair with them) and the temporary directory.
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
  wait 2> /dev/null
  ip netns del "${ns[0]}" 2> /dev/null
  ip netns del "${ns[1]}" 2> /dev/null
  ip link del "${dev[0]}" 2> /dev/null # only if it never moved into a namespace
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "${ns[0]}" 2> "$dir/err" || skip "cannot create a network namespace: $(cat "$dir/err")"
ip netns add "${ns[1]}" 2> "$dir/err" || skip "cannot create a network namespace: $(cat "$dir/err")"
ip link add "${dev[0]}" type veth peer name "${dev[1]}" 2> "$dir/err" ||
  skip "cannot create a veth pair: $(cat "$dir/err")"
for i in 0 1; do
  ip link set "${dev[$i]}" netns "${ns[$i]}" &&
    ns_ip "${ns[$i]}" addr add "${addr[$i]}/24" dev "${dev[$i]}" &&
    ns_ip "${ns[$i]}" link set lo up &&
    ns_ip "${ns[$i]}" link set "${dev[$i]}" up || {
    echo "FAIL: cannot set up ${ns[$i]}" >&2
    exit 1
  }
done

# A master address other hosts reach needs a job token (SPEC S3).
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
start=$(date +%s)
for i in 0 1; do
  j=$((1 - i))
  "$in_netns" "${ns[$i]}" env SG_NETNS_INDEX=$i SG_RANK=$i SG_WORLD_SIZE=2 \
    MASTER_ADDR="${addr[0]}" MASTER_PORT="${MASTER_PORT:-29577}" SG_JOB_TOKEN="$token" \
    UCX_TLS="${UCX_TLS:-tcp}" UCX_NET_DEVICES="${dev[$i]}" \
    SG_NETNS_DEV="${dev[$i]}" SG_NETNS_ADDR="${addr[$i]}" SG_NETNS_PEER_ADDR="${addr[$j]}" \
    SG_NETNS_CUT_FILE="$dir/cut" "$@" > >(sed -u "s/^/[ns$i] /") 2>&1 &
  pids+=($!)
done
workers=("${pids[@]}")

if [ -n "$down_after" ]; then
  (
    sleep "$down_after"
    t=$(date +%s%3N)
    ns_ip "${ns[0]}" link set "${dev[0]}" down
    ns_ip "${ns[1]}" link set "${dev[1]}" down
    echo "$t" > "$dir/cut.tmp" && mv "$dir/cut.tmp" "$dir/cut"
    echo "[netns] link ${dev[0]} <-> ${dev[1]} down at $t"
  ) &
  pids+=($!)
fi

# Wait for both commands, within the timeout.
status=0
for k in 0 1; do
  p=${workers[$k]}
  while kill -0 "$p" 2> /dev/null; do
    if [ $(($(date +%s) - start)) -ge "$timeout" ]; then
      echo "FAIL: [ns$k] still running after ${timeout} s (hung?)" >&2
      exit 124
    fi
    sleep 0.1
  done
  wait "$p"
  rc=$?
  echo "[netns] ns$k exited with status $rc"
  [ $status -eq 0 ] && status=$rc
done
exit $status
