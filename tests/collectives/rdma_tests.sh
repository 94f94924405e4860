#!/usr/bin/env bash
# The rdma transport against a real kernel verbs stack: boots a qemu guest with Soft-RoCE
# (rxe0) from the rdma-vm kit and runs rdma_guest.sh there on this build. The kit is found at
# $GYRE_RDMA_VM, ../shared/rdma-vm beside the source tree, or /work/shared/rdma-vm.
# Usage: rdma_tests.sh BUILD_DIR. Exits 77 (skipped) saying why when the guest cannot start.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/collectives/find_rdma_vm.sh"
require_rdma_vm "the rdma tests need its guest"
# The guest starts with a clean environment: pass on what the sanitizer builds need.
env_args=()
for name in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do
  [ -n "${!name:-}" ] && env_args+=(-e "$name=${!name}")
done
# The emulated guest is slow; everything inside is bounded by the tests' own timeouts too.
run_in_guest --timeout 1200 "${env_args[@]}" --share "$build" --ro-share "$src" -- \
  bash "$src/tests/collectives/rdma_guest.sh" "$build"
