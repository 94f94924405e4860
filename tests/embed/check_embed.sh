#!/usr/bin/env bash
# Outside projects that embed gyre from source with CMake's default generator: add_subdirectory
# of this tree and FetchContent of an archive of it both configure and generate; the
# FetchContent one (the stricter: only the files a release archive holds) builds and runs its
# consumer on 3 ranks. The two compile the same sources with the same flags, so one build
# shows what both would. Also checks that this tree configures and generates with the default generator
# with CUDA where nvcc is found (the CUDA and C++ dialects of mixed targets).
# Usage: check_embed.sh SOURCE_DIR GYRE_RUN_DIR
set -eu
src=$1
run_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset CMAKE_GENERATOR  # the default generator, as an embedder gets it

echo "--- this tree, default generator, CUDA auto: configure and generate"
cmake -S "$src" -B "$work/default" -DGYRE_BUILD_TESTS=OFF >"$work/default.log" 2>&1 ||
  { cat "$work/default.log"; echo "FAIL: default generator"; exit 1; }
grep 'gyre: CUDA' "$work/default.log"

# The files a release archive of this tree holds (the working tree, as git sees it).
(cd "$src" && git ls-files --cached --others --exclude-standard -z |
  xargs -0 tar --transform 's,^,gyre/,' -czf "$work/gyre.tar.gz")

for mode in add_subdirectory FetchContent; do
  source=$src
  [ "$mode" = FetchContent ] && source="file://$work/gyre.tar.gz"
  echo "--- $mode"
  cmake -S "$src/tests/embed" -B "$work/$mode" -DGYRE_EMBED=$mode -DGYRE_SOURCE="$source" \
    -DGYRE_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >"$work/$mode.log" 2>&1 ||
    { tail -40 "$work/$mode.log"; echo "FAIL: $mode configure"; exit 1; }
  [ "$mode" = FetchContent ] || continue
  cmake --build "$work/$mode" -j "$(nproc)" >>"$work/$mode.log" 2>&1 ||
    { tail -40 "$work/$mode.log"; echo "FAIL: $mode build"; exit 1; }
  GYRE_TIMEOUT=30 "$run_dir/gyre-run" -n 3 "$work/$mode/consumer_cxx" | tee "$work/out.txt"
  [ "$(grep -c ': ok$' "$work/out.txt")" -eq 3 ] || { echo "FAIL: $mode consumer"; exit 1; }
done
echo "PASS: default generator, add_subdirectory (configured), FetchContent (built and run)"
