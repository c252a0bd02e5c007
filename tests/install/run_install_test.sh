#!/bin/sh
# Installs the current build into a fresh prefix, builds the consumer project (CMakeLists.txt
# here) against it with find_package(ignis) and runs it.
#   run_install_test.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR [GENERATOR] [CXX_COMPILER]
# $IGNIS_CONSUMER_CXX_FLAGS, if set, is the consumer's CMAKE_CXX_FLAGS (sanitizer builds).
set -eu
cmake=$1 build=$2 src=$3 work=$4
gen=${5:-} cxx=${6:-}

fail() { echo "install test: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

echo "== cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install failed"; }

config=$(find "$prefix" -name ignisConfig.cmake | head -n 1)
[ -n "$config" ] || fail "no ignisConfig.cmake under $prefix"
[ -n "$(find "$prefix" -name 'libignis.so*' | head -n 1)" ] || fail "no libignis.so under $prefix"
[ -f "$prefix/include/ignis/ignis.h" ] || fail "no include/ignis/ignis.h under $prefix"
# A relocatable package: nothing in it may point back into the source or build tree.
root=$(cd "$src/../.." && pwd)
if grep -rlF -e "$root" -e "$build" "$(dirname "$config")"; then
  fail "the installed CMake files above reference the source or build tree"
fi

echo "== configure the consumer against $prefix"
set -- -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
[ -n "$gen" ] && set -- "$@" -G "$gen"
[ -n "$cxx" ] && set -- "$@" -DCMAKE_CXX_COMPILER="$cxx"
[ -n "${IGNIS_CONSUMER_CXX_FLAGS:-}" ] && set -- "$@" -DCMAKE_CXX_FLAGS="$IGNIS_CONSUMER_CXX_FLAGS"
"$cmake" "$@" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure failed"; }
found=$(sed -n 's/^ignis_DIR:PATH=//p' "$work/build/CMakeCache.txt")
case "$found" in
  "$prefix"/*) ;;
  *) fail "find_package(ignis) found '$found', not the package installed in $prefix" ;;
esac

echo "== build the consumer"
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build failed"; }

echo "== run the consumer"
exe=$work/build/consumer
lib=$(ldd "$exe" | sed -n 's/.*libignis\.so[^ ]* => \([^ ]*\).*/\1/p')
case "$lib" in
  "$prefix"/*) ;;
  *) fail "the consumer loads libignis from '$lib', not from $prefix" ;;
esac
out=$("$exe") || { echo "$out"; fail "the consumer exited with an error"; }
echo "$out"
[ "$out" = "OK" ] || fail "the consumer did not print OK"

# The installed program runs from its prefix alone (an RPATH relative to the binary).
if [ -e "$build/ignis" ]; then
  echo "== run the installed ignis"
  [ -x "$prefix/bin/ignis" ] || fail "no bin/ignis under $prefix"
  lib=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/ignis" | sed -n 's/.*libignis\.so[^ ]* => \([^ ]*\).*/\1/p')
  case "$lib" in
    "$prefix"/*) ;;
    *) fail "the installed ignis loads libignis from '$lib', not from $prefix" ;;
  esac
  v=$(env -u LD_LIBRARY_PATH "$prefix/bin/ignis" version) || fail "the installed ignis version failed"
  echo "$v" | head -n 1
  case "$v" in
    "ignis "*) ;;
    *) fail "the installed ignis version printed '$v'" ;;
  esac
fi
echo "install test: passed"
