#!/usr/bin/env bash
# Installs a build tree into a temporary prefix and uses it as a user would:
#   1. find_package(sgrt) + sgrt::sgrt and sgrt::sgrt_static (tests/install/consumer)
#   2. cc $(pkg-config --cflags --libs sgrt)
#   3. the installed bin/sgrt, which must find the installed libsgrt by itself
# usage: test_install.sh BUILD_DIR CONSUMER_SRC C_COMPILER GENERATOR LIBDIR [EXTRA_C_FLAGS]
set -euo pipefail

build=$1 consumer_src=$2 cc=$3 generator=$4 libdir=$5 extra_flags=${6:-}
cmake_bin=${CMAKE_COMMAND:-cmake}
work=$(mktemp -d "${TMPDIR:-/tmp}/sgrt-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "test_install: FAIL: $*" >&2; exit 1; }
# Directory from which EXE loads libsgrt.so, resolved (empty when it does not).
libsgrt_dir() {
  local lib
  lib=$(ldd "$1" | awk '/libsgrt\.so/ && $3 ~ /^\// {print $3}')
  [ -n "$lib" ] && dirname "$(readlink -f "$lib")"
}
step() { echo "== $*"; }

step "install $build into $prefix"
"$cmake_bin" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in include/sgrt/sgrt.h include/sgrt/graph.h "$libdir/libsgrt.so" "$libdir/libsgrt.a" \
         "$libdir/cmake/sgrt/sgrtConfig.cmake" "$libdir/cmake/sgrt/sgrtConfigVersion.cmake" \
         "$libdir/cmake/sgrt/sgrtTargets.cmake" "$libdir/pkgconfig/sgrt.pc" bin/sgrt; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
# No third-party header may leak into the public API.
if grep -rnE '#include *[<"](ucp/|uct/|ucs/|metis\.h|cuda|dnnl|protobuf-c|cjson|xxhash)' "$prefix/include"; then
  fail "installed headers include third-party headers"
fi

step "find_package(sgrt) consumer"
"$cmake_bin" -S "$consumer_src" -B "$work/consumer" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra_flags" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/consumer-configure.log" 2>&1 || { cat "$work/consumer-configure.log"; fail "consumer configure"; }
"$cmake_bin" --build "$work/consumer" >"$work/consumer-build.log" 2>&1 ||
  { cat "$work/consumer-build.log"; fail "consumer build"; }
for exe in consumer_shared consumer_static; do
  out=$("$work/consumer/$exe" "$work/$exe.sgg") || fail "$exe exited $?"
  echo "$out"
  [[ $out == "consumer: ok"* ]] || fail "$exe printed '$out'"
done
# The static consumer must not depend on libsgrt.so.
if ldd "$work/consumer/consumer_static" | grep -q libsgrt; then fail "consumer_static links libsgrt.so"; fi
libs=$(readlink -f "$prefix/$libdir")
[ "$(libsgrt_dir "$work/consumer/consumer_shared")" = "$libs" ] ||
  fail "consumer_shared does not use the installed libsgrt.so: $(ldd "$work/consumer/consumer_shared" | grep sgrt)"

step "pkg-config consumer"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
pc_version=$(pkg-config --modversion sgrt) || fail "pkg-config does not find sgrt"
pc_flags=$(pkg-config --cflags --libs sgrt)
echo "pkg-config sgrt $pc_version: $pc_flags"
[[ $pc_flags == *"-I$prefix/"* && $pc_flags == *"-L$prefix/"* ]] ||
  fail "pkg-config flags do not point into the prefix: $pc_flags"
# shellcheck disable=SC2086  # flags are meant to split
"$cc" $extra_flags -std=c11 -Wall -Wextra -Werror "$consumer_src/main.c" -o "$work/consumer_pc" $pc_flags ||
  fail "cc with pkg-config flags"
out=$(LD_LIBRARY_PATH=$prefix/$libdir "$work/consumer_pc" "$work/consumer_pc.sgg") || fail "consumer_pc exited $?"
echo "$out"
[[ $out == "consumer: ok"* ]] || fail "consumer_pc printed '$out'"
[[ $(pkg-config --static --libs sgrt) == *-lxxhash* ]] || fail "pkg-config --static misses libxxhash"

step "installed sgrt CLI"
unset LD_LIBRARY_PATH
[ "$(libsgrt_dir "$prefix/bin/sgrt")" = "$libs" ] ||
  fail "bin/sgrt does not find the installed libsgrt: $(ldd "$prefix/bin/sgrt" | grep sgrt)"
version=$("$prefix/bin/sgrt" --version) || fail "sgrt --version exited $?"
echo "$version"
[[ $version == "sgrt $pc_version "* ]] || fail "sgrt --version printed '$version', expected version $pc_version"
"$prefix/bin/sgrt" verify "$work/consumer_shared.sgg" || fail "installed sgrt cannot verify the consumer's file"
echo "test_install: ok"
