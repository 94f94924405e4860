#!/usr/bin/env bash
# A cluster case inside the rdma-vm kit's qemu guest, whose stock Debian kernel has what this
# machine's may lack (netem). The kit is found as for the rdma tests (find_rdma_vm.sh).
# Usage: in_vm.sh BIN_DIR CASE. Exits 77 (skipped) saying why when the guest cannot start.
set -u
bin=$(cd "$1" && pwd)
case_name=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/collectives/find_rdma_vm.sh"
require_rdma_vm "this case needs its guest"
build=$(cd "$bin/.." && pwd)
# The guest's Soft-RoCE device would carry the traffic between the namespace hosts outside
# their links (rxe0 is not namespaced); the guest removes it first.
run_in_guest --timeout 900 --share "$build" --ro-share "$src" -- \
  bash -c 'rdma link delete "$RDMA_VM_DEV" && exec bash "$0" "$1" "$2"' \
  "$src/tests/cluster/cluster_tests.sh" "$bin" "$case_name"
