#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on a GPU machine and packs it into
# one file to carry there (docs/cuda.md "The GPU check"). The GPU machines
# have the CUDA driver, the toolkit's and PyTorch's CUDA libraries and
# Python, but none of the Debian libraries sgrt links (oneDNN, UCX, METIS,
# protobuf-c, cJSON, xxHash, libpmem, ...): those travel in the bundle, the
# CUDA ones (cudart, NVRTC, cuBLASLt, cuDNN, NCCL) are found there.
#
# usage: scripts/gpu-bundle.sh [-j N]
# Writes build-gpu/gpu-bundle.tar.xz (under 64 MiB; checked): bin/
# (test_cuda_gpu, mlp_train, resnet50_train, resnet50_dist, sgrt) and lib/ (libsgrt and
# the non-system, non-CUDA libraries they load, as ldd resolves them here).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
[ "${1:-}" = "-j" ] && jobs=$2
[ -d /usr/local/cuda ] || { echo "gpu-bundle: no CUDA toolkit under /usr/local/cuda" >&2; exit 1; }
# Fault injection on: the check injects a lost rank and a failed device into GPU jobs (SG_INJECT).
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSG_WITH_CUDA=ON -DSG_WERROR=ON \
  -DSG_FAULT_INJECTION=ON >/dev/null
ninja -C build-gpu -j "$jobs" sgrt test_cuda_gpu mlp_train resnet50_train resnet50_dist sgrt_cli >/dev/null
b=build-gpu/bundle
rm -rf "$b" && mkdir -p "$b/bin" "$b/lib"
cp build-gpu/tests/test_cuda_gpu build-gpu/examples/mlp_train build-gpu/examples/resnet50_train \
   build-gpu/examples/resnet50_dist build-gpu/tools/sgrt "$b/bin/"
# Libraries: everything ldd resolves but glibc's own, the C++ runtime and CUDA's.
skip='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+|libcuda|libcudart|libnvrtc|libcublas|libcublasLt|libcudnn.*|libnccl)\.so'
for f in "$b"/bin/*; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$b/lib/$name"
  done
tar -C "$b" -cJf build-gpu/gpu-bundle.tar.xz bin lib
size=$(stat -c %s build-gpu/gpu-bundle.tar.xz)
[ "$size" -lt $((60 << 20)) ] || { echo "gpu-bundle: $size bytes: over the 60 MiB kept for it" >&2; exit 1; }
echo "gpu-bundle: build-gpu/gpu-bundle.tar.xz, $((size >> 20)) MiB ($(ls "$b/lib" | wc -l) libraries)"
