#!/usr/bin/env bash
# Installs a build into a temporary prefix and builds a program against it, as a user would: with
# find_package(vlattice) and with pkg-config, from the installed headers alone.
#   tests/install/check_install.sh BUILD_DIR CMAKE_GENERATOR CXX_COMPILER
set -euo pipefail
[[ $# -eq 3 ]] || { sed -n '2,4p' "$0" >&2; exit 2; }
build=$1 generator=$2 cxx=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
expected="4 x 2, 2 anchors, energy 0.25"

fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$prefix" -name vlattice.pc)
[[ -n "$pc" ]] || fail "no vlattice.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")
for file in "$libdir/libvlattice.a" "$libdir/cmake/vlattice/vlatticeConfig.cmake" \
  "$libdir/cmake/vlattice/vlatticeConfigVersion.cmake" "$libdir/cmake/vlattice/vlatticeTargets.cmake" \
  "$prefix/include/vlattice/io.hpp" "$prefix/bin/vlattice"; do
  [[ -f "$file" ]] || fail "$file was not installed"
done
"$prefix/bin/vlattice" --version | grep -q '^vlattice ' || fail "the installed CLI does not run"

# Every public header together, from the prefix only: none may need a header that is not installed.
for header in "$prefix"/include/vlattice/*.hpp; do
  echo "#include <vlattice/$(basename "$header")>"
done >"$work/all_headers.cpp"

cmake -S "$here/consumer" -B "$work/consumer" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "the consumer does not configure with find_package(vlattice)"; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "the consumer does not build"; }
got=$("$work/consumer/consumer" "$work/cmake.h5")
[[ "$got" == "$expected" ]] || fail "the find_package consumer printed '$got', expected '$expected'"
echo "find_package(vlattice): $got"

if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  read -r -a flags <<<"$(pkg-config --cflags vlattice)"
  read -r -a libs <<<"$(pkg-config --libs vlattice)"
  "$cxx" -std=c++17 "${flags[@]}" -fsyntax-only "$work/all_headers.cpp" || fail "the installed headers do not compile alone"
  "$cxx" -std=c++17 "${flags[@]}" "$here/consumer/main.cpp" -o "$work/consumer-pc" "${libs[@]}" ||
    fail "the consumer does not build with pkg-config's flags"
  got=$("$work/consumer-pc" "$work/pkg-config.h5")
  [[ "$got" == "$expected" ]] || fail "the pkg-config consumer printed '$got', expected '$expected'"
  echo "pkg-config vlattice: $got"
else
  "$cxx" -std=c++17 -I"$prefix/include" -fopenmp -fsyntax-only "$work/all_headers.cpp" ||
    fail "the installed headers do not compile alone"
  echo "pkg-config not found: the .pc file was installed but not tried"
fi
