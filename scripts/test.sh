#!/usr/bin/env bash
# Command 2: install dependencies, build, and run every test: the release build, then the
# torch tests against torch 2.x from PyPI (scripts/test-torch2.sh; GYRE_TEST_TORCH2=0 leaves
# them out), then the whole suite under ASan+UBSan, then the thread-rank tests under TSan, then
# each libFuzzer target for GYRE_FUZZ_SECONDS (default 20). GYRE_TEST_QUICK=1 runs the release
# build only.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)
# The sanitizer and fuzzer builds keep line tables only (enough for their stack traces): -g1
# compiles a third faster than -g. ASan and the fuzzers at -O1, as they advise, which halves
# their compile time against -O2; TSan at -O2, where -O1 cost its tests more than it saved.
flags() { echo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O$1 -g1 -DNDEBUG"; }

echo "=== format check (.clang-format)"
git ls-files '*.h' '*.hpp' '*.cc' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror
echo "=== layers (docs/architecture.md)"
./scripts/check-layers.sh

echo "=== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure --timeout 900 -j 1)

if [ "${GYRE_TEST_QUICK:-0}" = 1 ]; then exit 0; fi

# The release build's torch tests ran against Debian's torch 1.13; torchrun, accelerate and
# FSDP need torch 2.x.
if [ "${GYRE_TEST_TORCH2:-1}" = 1 ]; then
  echo "=== torch 2.x from PyPI"
  ./scripts/test-torch2.sh
else
  echo "=== torch 2.x from PyPI: left out (GYRE_TEST_TORCH2=0)"
fi

echo "=== ASan + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$(flags 1)" \
  -DGYRE_SANITIZE=address -DGYRE_WITH_CUDA=OFF
cmake --build build-asan -j "$jobs"
# install: an uninstrumented outside program cannot load an ASan library. embed and layers
# test the build and the tree, not the code; the rdma guest (5-6 min of qemu) and its
# watchdog ran in the release build already.
suppressions="$PWD/.ci/lsan.supp"  # libcrypto's own caches; see the file
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$suppressions" \
  ctest --output-on-failure --timeout 900 -E '^(install|embed|layers|rdma|rdma-vm\..*|cluster\..*|slurm\..*)$')

echo "=== TSan build (ranks as threads)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$(flags 2)" \
  -DGYRE_SANITIZE=thread -DGYRE_WITH_CUDA=OFF \
  -DGYRE_BUILD_TOOLS=OFF
cmake --build build-tsan -j "$jobs" --target unit_tests collective_tests
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ctest --output-on-failure --timeout 1500 -R '^(unit|collectives)$')

echo "=== libFuzzer targets (${GYRE_FUZZ_SECONDS:-20} s each)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$(flags 1)" \
  -DGYRE_FUZZ=ON -DGYRE_WITH_CUDA=OFF -DGYRE_BUILD_TESTS=OFF -DGYRE_BUILD_TOOLS=OFF
cmake --build build-fuzz -j "$jobs" --target store_request_fuzz handshake_fuzz frame_fuzz c_api_fuzz
for target in store_request handshake frame c_api; do
  corpus=build-fuzz/corpus/$target
  mkdir -p "$corpus"
  LSAN_OPTIONS="suppressions=$suppressions" \
    build-fuzz/tests/fuzz/${target}_fuzz -max_total_time="${GYRE_FUZZ_SECONDS:-20}" \
    -print_final_stats=1 -artifact_prefix=build-fuzz/ "$corpus" 2>&1 | grep -E '^(stat::number_of_executed_units|Done|==[0-9]+==ERROR)'
done
echo "fuzz: no crash"
