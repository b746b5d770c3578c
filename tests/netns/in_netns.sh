#!/usr/bin/env bash
# in_netns.sh NS CMD [ARGS...]: runs CMD inside the network namespace NS (made
# by `ip netns add`) as `ip netns exec NS CMD` would, but without remounting
# "/": that remount fails where "/" is not a mount point (a chroot, such as
# ../shared/tools/fresh-machine.sh builds: "mount --make-rslave / failed:
# Invalid argument"). nsenter enters the namespace; CMD gets a mount
# namespace of its own whose /sys is a sysfs of NS (UCX lists network devices
# under /sys/class/net), made a slave first so that nothing propagates back
# to the host's /sys. Every step execs: CMD keeps this script's pid, so a
# caller's kill or wait reaches it.
set -eu
[ $# -ge 2 ] || { echo "usage: in_netns.sh NS CMD [ARGS...]" >&2; exit 2; }
ns=$1
shift
# --propagation unchanged: unshare's default makes "/" private, the very
# remount that fails in a chroot.
exec nsenter --net="/var/run/netns/$ns" unshare --mount --propagation unchanged -- sh -c \
  'mount --make-rslave /sys && umount -l /sys && mount -t sysfs "$0" /sys && exec "$@"' "$ns" "$@"
