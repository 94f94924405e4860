#!/usr/bin/env bash
# Collects the build dependencies' headers (asio, CLI11, doctest, OpenSSL's with libcrypto) from
# this machine's packages into DIR, for a GPU machine that cannot install packages:
#   tools/gpu-deps.sh DIR        (needs libasio-dev libcli11-dev doctest-dev libssl-dev here)
# then, there: GPU_CHECK_CMAKE_ARGS="$(tools/gpu-deps.sh --cmake-args DIR)" tools/gpu-check.sh
set -euo pipefail
if [ "${1:-}" = --cmake-args ]; then
  d=$(cd "$2" && pwd)
  echo "-DCMAKE_PREFIX_PATH=$d -DOPENSSL_ROOT_DIR=$d -DASIO_INCLUDE_DIR=$d/include"
  exit 0
fi
d=${1:?usage: gpu-deps.sh DIR | --cmake-args DIR}
multiarch=$(gcc -print-multiarch)
# Replaces only a folder this script made (it leaves a marker) or an empty one.
if [ -d "$d" ] && [ -n "$(ls -A "$d")" ] && [ ! -e "$d/.gyre-gpu-deps" ]; then
  echo "gpu-deps: $d exists and was not made by this script; name a new folder" >&2
  exit 2
fi
rm -rf "$d"
mkdir -p "$d/include" "$d/lib/cmake" "$d/share/cmake"
touch "$d/.gyre-gpu-deps"
cp -r /usr/include/asio /usr/include/asio.hpp /usr/include/CLI /usr/include/doctest \
  /usr/include/openssl "$d/include/"
cp /usr/include/"$multiarch"/openssl/* "$d/include/openssl/"
cp /usr/lib/"$multiarch"/libcrypto.so.3 "$d/lib/"
ln -s libcrypto.so.3 "$d/lib/libcrypto.so"
cp -r /usr/lib/cmake/doctest "$d/lib/cmake/"
# Debian's doctest package names /usr as its prefix; the copy finds its headers beside itself.
sed -i 's|set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$d/lib/cmake/doctest/doctestTargets.cmake"
cp -r /usr/share/cmake/CLI11 "$d/share/cmake/"
du -sh "$d"
