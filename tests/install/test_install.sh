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
# As written in the README: no LD_LIBRARY_PATH (the .pc file's -rpath finds the installed library).
out=$(env -u LD_LIBRARY_PATH "$work/consumer_pc" "$work/consumer_pc.sgg") || fail "consumer_pc exited $?"
echo "$out"
[[ $out == "consumer: ok"* ]] || fail "consumer_pc printed '$out'"
[ "$(env -u LD_LIBRARY_PATH bash -c "$(declare -f libsgrt_dir); libsgrt_dir '$work/consumer_pc'")" = "$libs" ] ||
  fail "consumer_pc does not load the installed libsgrt.so: $(ldd "$work/consumer_pc" | grep sgrt)"
[[ $(pkg-config --static --libs sgrt) == *-lxxhash* ]] || fail "pkg-config --static misses libxxhash"

step "the build tree as a package (sgrt_DIR=$build): sgrt::sgrt"
"$cmake_bin" -S "$consumer_src" -B "$work/tree" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$extra_flags" -Dsgrt_DIR="$build" \
  >"$work/tree-configure.log" 2>&1 || { cat "$work/tree-configure.log"; fail "build-tree consumer configure"; }
"$cmake_bin" --build "$work/tree" >"$work/tree-build.log" 2>&1 || { cat "$work/tree-build.log"; fail "build-tree consumer build"; }
out=$(env -u LD_LIBRARY_PATH "$work/tree/consumer_shared" "$work/tree.sgg") || fail "build-tree consumer exited $?"
echo "$out"
[[ $out == "consumer: ok"* ]] || fail "build-tree consumer printed '$out'"
[ "$(libsgrt_dir "$work/tree/consumer_shared")" = "$(readlink -f "$(dirname "$(find "$build/src" -maxdepth 1 -name 'libsgrt.so' | head -1)")")" ] ||
  fail "the build-tree consumer does not use the build tree's libsgrt.so: $(ldd "$work/tree/consumer_shared" | grep sgrt)"

step "installed sgrt CLI"
unset LD_LIBRARY_PATH
[ "$(libsgrt_dir "$prefix/bin/sgrt")" = "$libs" ] ||
  fail "bin/sgrt does not find the installed libsgrt: $(ldd "$prefix/bin/sgrt" | grep sgrt)"
version=$("$prefix/bin/sgrt" --version) || fail "sgrt --version exited $?"
echo "$version"
[[ $version == "sgrt $pc_version "* ]] || fail "sgrt --version printed '$version', expected version $pc_version"
"$prefix/bin/sgrt" verify "$work/consumer_shared.sgg" || fail "installed sgrt cannot verify the consumer's file"
echo "test_install: ok"
