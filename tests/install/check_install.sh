#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds outside projects against it:
# CMake find_package(gyre) and pkg-config. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(ls "$prefix"/lib*/libgyre.so | head -1)
libdir=$(dirname "$lib")

# Only the C API leaves the shared library.
extra=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRWVGSiu]$/ {print $3}' | grep -v '^gyre' || true)
if [ -n "$extra" ]; then echo "FAIL: libgyre.so exports non-API symbols:"; echo "$extra" | head; exit 1; fi

cmake -S "$src/tests/install/consumer" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
GYRE_TIMEOUT=30 "$prefix/bin/gyre-run" -n 3 "$prefix/consumer-build/consumer_cxx" | tee "$prefix/out.txt"
[ "$(grep -c ': ok$' "$prefix/out.txt")" -eq 3 ] || { echo "FAIL: find_package consumer"; exit 1; }

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc "$src/tests/install/consumer/consumer.c" -o "$prefix/consumer_c" $(pkg-config --cflags --libs gyre) \
  -Wl,-rpath,"$libdir"
"$prefix/consumer_c" | grep -q 'c consumer ok' || { echo "FAIL: pkg-config consumer"; exit 1; }
echo "PASS: install, find_package(gyre), pkg-config"
