# shellcheck shell=bash
# Sourced by the namespace tests: commands inside a named network namespace
# without `ip -n` / `ip netns exec`, which remount "/" first and fail where it
# is not a mount point (a chroot; see in_netns.sh).
#
#   ns_ip NS ARGS...         `ip ARGS...` inside NS (netlink needs no /sys)
#   "$in_netns" NS CMD...    CMD inside NS with NS's /sys (in_netns.sh; not a
#                            function, so that `&` and $! give CMD's own pid)

in_netns="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/in_netns.sh"

ns_ip() {
  local ns=$1
  shift
  nsenter --net="/var/run/netns/$ns" ip "$@"
}
