#!/usr/bin/env bash
# The virtual environment with PyTorch 2.x (and torchvision) that bench/fusion.sh compares sgrt
# against (eager and torch.compile: the stronger peer; Debian's python3-torch
# is 1.13, which has no torch.compile). Creates it if it is missing or broken,
# then prints its python's path as the last line of stdout (progress goes to
# stderr). Idempotent: a second run only checks the environment and prints.
#
#   bench/torch_venv.sh [--check] [--help]
#
#   --check  create nothing: print the path if the environment works, else
#            say why and exit 1
#
# Environment:
#   SG_BENCH_VENV   where (default $HOME/.cache/sgrt-bench/venv; outside the
#                   repo: it is several GB)
#   SG_BENCH_TORCH  the pip requirement (default "torch>=2,<3")
#
# Only PyPI is reachable from these machines, and PyPI's x86_64 torch wheels
# are the CUDA builds: pip brings the nvidia-* libraries along (unused on the
# CPU, but torch will not import without them). torch.compile's CPU backend
# (inductor) compiles C++ at run time: it needs g++ and Python's headers
# (Debian's g++ and python3-dev), installed here with apt-get when missing and
# we are root. The first run verifies that torch.compile works on a tiny
# function and records that in the environment (.sgrt-bench-ok).
set -euo pipefail

venv=${SG_BENCH_VENV:-$HOME/.cache/sgrt-bench/venv}
spec=${SG_BENCH_TORCH:-torch>=2,<3}
check=0
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=1; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "torch_venv: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "torch_venv: $*" >&2; }
py=$venv/bin/python
stamp=$venv/.sgrt-bench-ok

# Works: torch 2.x imports and torch.compile was verified with this version.
works() {
  [ -x "$py" ] && [ -f "$stamp" ] || return 1
  local v
  v=$("$py" -c 'import torch, torchvision; print(torch.__version__)' 2> /dev/null) || return 1
  [ "$v" = "$(cat "$stamp")" ]
}
if works; then
  echo "$py"
  exit 0
fi
if [ "$check" = 1 ]; then
  say "no working PyTorch 2.x environment at $venv (create it with bench/torch_venv.sh)"
  exit 1
fi

# Debian packages the environment and torch.compile need.
need=()
command -v g++ > /dev/null || need+=(g++)
base_inc=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$base_inc/Python.h" ] || need+=(python3-dev)
/usr/bin/python3 -c 'import ensurepip' 2> /dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    say "missing Debian packages: ${need[*]}; install them (apt-get install ${need[*]}) and rerun"
    exit 1
  fi
  say "installing ${need[*]} with apt-get"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

start=$(date +%s)
if [ ! -x "$py" ]; then
  say "creating $venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv"
fi
if ! "$py" -c 'import torch, torchvision, sys; sys.exit(not torch.__version__.startswith("2."))' 2> /dev/null; then
  say "pip install '$spec' torchvision (several GB with the CUDA libraries PyPI's torch depends on)"
  "$py" -m pip install --quiet --upgrade pip >&2
  "$py" -m pip install --quiet "$spec" torchvision numpy >&2
fi
version=$("$py" -c 'import torch; print(torch.__version__)')

# torch.compile on a tiny function, against eager.
say "torch $version: checking torch.compile (inductor, C++ on the CPU)"
"$py" - >&2 << 'EOF'
import torch

def f(x, w):
    return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x @ w, (w.shape[1],)))

x, w = torch.randn(8, 16), torch.randn(16, 16)
got = torch.compile(f)(x, w)
want = f(x, w)
assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), (got - want).abs().max()
print("torch.compile ok")
EOF
echo "$version" > "$stamp"
say "ready in $(($(date +%s) - start)) s; $(du -sh "$venv" | cut -f1) at $venv"
echo "$py"
