# shellcheck shell=bash disable=SC2034,SC2154  # names, start: set by the script; tag, rc: read by it
# Shared by netns_nodes.sh and netns_heal.sh: "nodes" that are network
# namespaces, each joined by a veth pair to a bridge in a hub namespace, and
# the teardown of all of it. Source it after `set -u`; it sets tag (this
# script's pid, in every name). Then name the pieces, each name a prefix that
# the node's index completes, and call netns_begin:
#
#   hub=sgm$tag            the hub namespace (its bridge is br0)
#   node_ns=sgm$tag-       node i's namespace
#   node_if=sgw$tag-       node i's end of its veth pair (in its namespace)
#   hub_if=sgx$tag-        the other end (in the hub, on the bridge)
#   subnet=10.78.1         node i's address is $subnet.$((10 + i))/24
#   netns_begin NAME COUNT
#
# Processes started in the background go into pids: the teardown kills them
# (and only them) on every exit path.

tag=$$
# shellcheck source=tests/netns/nsexec.sh
. "$(dirname "${BASH_SOURCE[0]}")/nsexec.sh"

skip() {
  echo "SKIP: $*"
  exit 77
}

netns_cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null; done
  wait 2> /dev/null
  for ((i = 0; i < netns_count; i++)); do ip netns del "$node_ns$i" 2> /dev/null; done
  ip netns del "$hub" 2> /dev/null
  rm -rf "$dir"
}

# Skips (77) without root or iproute2; makes the temporary folder dir
# (sg-netns-NAME.*), the hub with its bridge, and nodes 0..COUNT-1; skips
# when the kernel lacks namespaces, bridges or veth pairs, fails (1) when a
# node cannot be set up.
netns_begin() {
  netns_count=$2
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v ip > /dev/null || skip "no 'ip' command (iproute2)"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/sg-netns-$1.XXXXXX") || exit 1
  pids=()
  trap netns_cleanup EXIT
  trap 'exit 130' INT TERM
  ip netns add "$hub" 2> "$dir/err" || skip "cannot create a network namespace: $(cat "$dir/err")"
  ns_ip "$hub" link add br0 type bridge 2> "$dir/err" || skip "cannot create a bridge: $(cat "$dir/err")"
  ns_ip "$hub" link set br0 up
  local i ns
  for ((i = 0; i < netns_count; i++)); do
    ns=$node_ns$i
    ip netns add "$ns" && ip link add "$node_if$i" type veth peer name "$hub_if$i" 2> "$dir/err" ||
      skip "cannot create a veth pair: $(cat "$dir/err")"
    ip link set "$node_if$i" netns "$ns" && ip link set "$hub_if$i" netns "$hub" &&
      ns_ip "$hub" link set "$hub_if$i" master br0 && ns_ip "$hub" link set "$hub_if$i" up &&
      ns_ip "$ns" addr add "$subnet.$((10 + i))/24" dev "$node_if$i" && ns_ip "$ns" link set lo up &&
      ns_ip "$ns" link set "$node_if$i" up || {
      echo "FAIL: cannot set up $ns" >&2
      exit 1
    }
  done
}

# netns_wait PID RANK LIMIT: waits for rank RANK's process and sets rc to its
# exit status; LIMIT seconds after $start it fails the script (124).
netns_wait() {
  while kill -0 "$1" 2> /dev/null; do
    if [ $(($(date +%s) - start)) -ge "$3" ]; then
      echo "FAIL: rank $2 still running after $3 s (hung?)" >&2
      exit 124
    fi
    sleep 0.1
  done
  wait "$1"
  rc=$?
}
