#!/usr/bin/env bash
# Inside the Soft-RoCE guest (see rdma_tests.sh): the rdma transport's tests, ranks as threads
# and as processes. Usage: rdma_guest.sh BUILD_DIR
set -u
build=$1
here=$(cd "$(dirname "$0")" && pwd)
failed=()
ibv_devices
echo "== collective_tests over rdma (matrix n = 2, 3, 4; a peer leaving; a mismatch)"
"$build/tests/collective_tests" -tc='*rdma*' || failed+=(collective_tests)
export GYRE_TRANSPORT=rdma
for case in walkthrough bench failing-rank kill9; do
  echo "== process.$case over rdma"
  "$here/process_tests.sh" "$build/tools" "$case" || failed+=("process.$case")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "rdma: FAILED: ${failed[*]}"
  exit 1
fi
echo "rdma: all passed"
