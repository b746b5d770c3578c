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

step "the Python package: cmake --install's, and pip install ./python"
repo=$(cd "$consumer_src/../../.." && pwd)
if [[ $extra_flags == *-fsanitize* ]]; then
  # Python cannot load a sanitizer build's library (its runtime must come first): the plain build checks this.
  echo "(skipped in a sanitizer build)"
else
pyd=$prefix/$libdir/python3/dist-packages
got=$(cd "$work" && env -u SGRT_LIBRARY PYTHONPATH="$pyd" /usr/bin/python3 -c 'import sgrt; print(sgrt.library_path)') ||
  fail "import sgrt from $pyd"
[ "$(readlink -f "$got")" = "$(readlink -f "$prefix/$libdir/libsgrt.so.0")" ] ||
  fail "the installed package loads $got, not the installed library"
echo "cmake --install: import sgrt loads $got"
/usr/bin/python3 -m venv --system-site-packages "$work/venv" || fail "python3 -m venv (python3-venv)"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation "$repo/python" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install ./python"; }
[ ! -e "$repo/python/sgrt.egg-info" ] || rm -rf "$repo/python/sgrt.egg-info" "$repo/python/build"
# Found beside the sgrt tool on PATH, and under sgrt launch (which passes its own library on).
got=$(cd "$work" && env -u SGRT_LIBRARY PATH="$prefix/bin:$PATH" "$work/venv/bin/python" -c \
  'import sgrt; print(sgrt.library_path)') || fail "import sgrt after pip install"
[ "$(readlink -f "$got")" = "$(readlink -f "$prefix/$libdir/libsgrt.so.0")" ] || fail "pip's sgrt loads $got"
out=$(cd "$work" && env -u SGRT_LIBRARY "$prefix/bin/sgrt" launch -n 2 -- "$work/venv/bin/python" -c \
  'import os, sgrt; print(os.environ["RANK"], os.path.realpath(sgrt.library_path))') || fail "sgrt launch of pip's sgrt"
[ "$(sort <<<"$out" | awk '{print $2}' | sort -u)" = "$(readlink -f "$prefix/$libdir/libsgrt.so.0")" ] ||
  fail "under sgrt launch, pip's sgrt loads: $out"
echo "pip install ./python: import sgrt loads the installed library (beside the tool; under sgrt launch)"
fi

step "installed sgrt CLI"
unset LD_LIBRARY_PATH
[ "$(libsgrt_dir "$prefix/bin/sgrt")" = "$libs" ] ||
  fail "bin/sgrt does not find the installed libsgrt: $(ldd "$prefix/bin/sgrt" | grep sgrt)"
version=$("$prefix/bin/sgrt" --version) || fail "sgrt --version exited $?"
echo "$version"
[[ $version == "sgrt $pc_version "* ]] || fail "sgrt --version printed '$version', expected version $pc_version"
"$prefix/bin/sgrt" verify "$work/consumer_shared.sgg" || fail "installed sgrt cannot verify the consumer's file"
echo "test_install: ok"
