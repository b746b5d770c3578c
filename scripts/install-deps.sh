#!/usr/bin/env bash
# Installs the Debian 12 packages sgrt needs to build and test, and only those
# that are missing. Safe to run again: with everything present it changes
# nothing and says so.
set -euo pipefail

# The one list of required packages. Later features add theirs here.
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  clang clang-format libclang-rt-14-dev  # sanitizer and libFuzzer runtimes (only recommended by clang)
  libmetis-dev
  libucx-dev ucx-utils libibverbs-dev
  libdnnl-dev
  libprotobuf-c-dev protobuf-c-compiler
  libcjson-dev libxxhash-dev libpmem-dev
  libcmocka-dev
  graphviz
  python3 python3-numpy python3-onnx python3-pytest python3-torch python3-torchvision
  openmpi-bin              # mpirun, for the launcher tests (dist_mpirun_np4)
  iproute2 procps          # ip netns/veth for the multi-host tests; ps, pkill
  prometheus               # promtool and a server that scrapes an example's /metrics (check_metrics.sh)
  python3-venv python3-wheel  # virtual environments (tensorboard below; pip install ./python offline)
)

# Python packages Debian does not ship, from PyPI into a virtual environment of their own (never
# into the system's Python): tensorboard, whose event reader checks the examples' --tensorboard files
# (tests/examples/check_tensorboard.sh finds it here).
PY_TOOLS=${XDG_CACHE_HOME:-$HOME/.cache}/sgrt/py-tools
PY_PACKAGES=(tensorboard)
py_tools() {
  "$PY_TOOLS/bin/python" -c 'import tensorboard' 2>/dev/null && return 0
  echo "install-deps: installing ${PY_PACKAGES[*]} into $PY_TOOLS (pip, from PyPI)"
  # pip trusts the system's CA bundle (which holds the local CAs of /usr/local/share/ca-certificates,
  # e.g. a company proxy's, once update-ca-certificates has seen them) rather than only its own.
  local cert=()
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1 && command -v update-ca-certificates >/dev/null; then
    "${sudo[@]}" update-ca-certificates >/dev/null 2>&1 || true
  fi
  [ -s /etc/ssl/certs/ca-certificates.crt ] && cert=(--cert /etc/ssl/certs/ca-certificates.crt)
  /usr/bin/python3 -m venv --system-site-packages "$PY_TOOLS" &&
    "$PY_TOOLS/bin/python" -m pip install -q --disable-pip-version-check "${cert[@]}" "${PY_PACKAGES[@]}" ||
    echo "install-deps: WARNING: could not install ${PY_PACKAGES[*]} (no PyPI?); the tests that need it skip" >&2
}

sudo=()
[ "$(id -u)" -eq 0 ] || ! command -v sudo >/dev/null || sudo=(sudo)
missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  py_tools
  echo "install-deps: all dependencies present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# No package here is wanted as a running service (prometheus would start a daemon on :9090): while
# apt installs, a policy-rc.d that denies every start, unless the machine has one of its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/install-deps.sh: start no service while it installs packages\nexit 101\n' |
    "${sudo[@]}" tee "$policy" >/dev/null && "${sudo[@]}" chmod 755 "$policy" && own_policy=1
  trap '[ $own_policy = 1 ] && "${sudo[@]}" rm -f "$policy"' EXIT
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
py_tools
echo "install-deps: done"
