#!/bin/sh
# Installs flashkv from BUILD_DIR into a fresh prefix and builds examples/c out of tree against it, once with
# find_package(flashkv) and once with pkg-config, then runs both builds on CHECKPOINT: they must print the
# same tokens. Proves the installed headers, library and package files are complete and relocatable.
#
#   check_install.sh BUILD_DIR SOURCE_DIR CHECKPOINT WORK_DIR C_COMPILER
set -eu
build=$1 source=$2 checkpoint=$3 work=$4 cc=$5
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

cmake --install "$build" --prefix "$prefix" --component flashkv >"$work/install.log"
for f in include/flashkv.h include/flashkv/flashkv.hpp; do
  [ -f "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
pc=$(find "$prefix" -name flashkv.pc)
config=$(find "$prefix" -name flashkvConfig.cmake)
[ -n "$pc" ] && [ -n "$config" ] || { echo "no flashkv.pc or flashkvConfig.cmake under $prefix"; exit 1; }

echo "== find_package(flashkv)"
cmake -S "$source/examples/c" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log"
cmake --build "$work/cmake" >"$work/build.log"
"$work/cmake/flashkv_example_c" "$checkpoint" | tee "$work/cmake.out"

echo "== pkg-config flashkv"
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir flashkv)
# shellcheck disable=SC2046 # the flags are words
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$source/examples/c/generate.c" $(pkg-config --cflags --libs flashkv) \
  -Wl,-rpath,"$libdir" -o "$work/generate-pkg-config"
"$work/generate-pkg-config" "$checkpoint" | tee "$work/pkg-config.out"

cmp "$work/cmake.out" "$work/pkg-config.out"
grep -q "^greedy: [0-9]" "$work/cmake.out"
