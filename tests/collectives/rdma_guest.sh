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
for case in walkthrough bench; do
  echo "== process.$case over rdma"
  "$here/process_tests.sh" "$build/tools" "$case" || failed+=("process.$case")
done
for case in failing-rank kill9; do
  echo "== process.$case over rdma"
  "$here/process_faults.sh" "$build/tools" "$case" || failed+=("process.$case")
done

# Random verified collectives of every kind, as processes, with slots small enough that every
# call takes many slices: n = 3 and 4 (n = 2 ran in the matrix above).
for n in 3 4; do
  echo "== soak over rdma, $n ranks as processes, 256-byte slots"
  out=$(GYRE_SLOT_BYTES=256 GYRE_NSLOTS=4 GYRE_TIMEOUT=60 timeout 180 "$build/tools/gyre-run" -n $n \
    "$build/tools/gyre-bench" --soak 6 -e 64K --seed $n 2>&1)
  echo "$out" | grep 'soak:'
  echo "$out" | grep -qE '^\[0\] soak: .* 0 wrong elements' || { echo "$out" | tail -20; failed+=("soak-$n"); }
done

# Two "machines" (two gyre-run, the second under another host name) with GYRE_TRANSPORT
# unset: ranks on one machine use shared memory, across machines rdma (auto).
echo "== auto: two machines of 2 ranks, shm within, rdma across"
(
  unset GYRE_TRANSPORT
  log=$(mktemp)
  "$build/tools/gyre-rendezvous" --host 127.0.0.1 --port 0 >"$log.server" 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q 'listening on' "$log.server" && break; sleep 0.05; done
  address=$(sed -n 's/^gyre-rendezvous listening on //p' "$log.server")
  for node in 0 1; do
    launch=("$build/tools/gyre-run" -n 2 --nnodes 2 --node-rank $node --rendezvous "$address"
      --job auto-rdma -- "$build/tools/walkthrough")
    if [ $node = 1 ]; then
      GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 unshare --uts sh -c 'hostname machine-b && exec "$@"' sh \
        "${launch[@]}" >"$log.$node" 2>&1 &
    else
      GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "${launch[@]}" >"$log.$node" 2>&1 &
    fi
    pids[$node]=$!
  done
  ok=1
  for node in 0 1; do wait "${pids[$node]}" || ok=0; done
  kill $server
  cat "$log.0" "$log.1" | grep -E 'ready|walkthrough:'
  [ $ok = 1 ] && grep -q '^\[0\] walkthrough: 4 ranks, all correct' "$log.0" &&
    [ "$(cat "$log.0" "$log.1" | grep -c 'peers over shm 1, rdma 2, tcp 0')" = 4 ]
) || failed+=(auto-across-machines)

if [ ${#failed[@]} -gt 0 ]; then
  echo "rdma: FAILED: ${failed[*]}"
  exit 1
fi
echo "rdma: all passed"
