#!/usr/bin/env bash
# The rdma transport beside its limit and beside tcp, all in one Soft-RoCE guest from the
# rdma-vm kit (see tests/collectives/rdma_tests.sh for where it is found). The guest is
# emulated: read the figures relative to each other, never as absolute speeds.
#   tools/bench/rdma_bench.sh [BUILD_DIR]     (default: build)
# Prints perftest's ib_write_bw (1 MiB writes) and ib_write_lat (8 B), then gyre-bench
# all_reduce with 2 ranks over rdma and over tcp, and sendrecv over rdma from plain and from
# registered buffers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

if [ "${1:-}" = --inside ]; then
  build=$2
  dev=${RDMA_VM_DEV:-rxe0}
  gid=${RDMA_VM_GID_INDEX:-1}
  wait_port() {
    for _ in $(seq 100); do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.1; done
    return 1
  }
  perftest() {  # perftest TOOL PORT ARGS...: server and client in this guest; prints the client
    local tool=$1 port=$2
    shift 2
    timeout 300 "$tool" -d "$dev" -x "$gid" -p "$port" "$@" >/tmp/$tool.server 2>&1 &
    wait_port "$port"
    timeout 300 "$tool" -d "$dev" -x "$gid" -p "$port" "$@" 127.0.0.1 >/tmp/$tool.client 2>&1
    wait
    cat /tmp/$tool.client
  }
  echo "== guest: $(uname -r), $(nproc) vCPUs, $dev (GID index $gid)"
  echo "== ib_write_bw, 1 MiB writes (the limit)"
  perftest ib_write_bw 18516 -s 1048576 -n 200 --report_gbits | grep -A1 '#bytes'
  echo "== ib_write_lat, 8 B"
  perftest ib_write_lat 18517 -s 8 -n 1000 | grep -A1 '#bytes'
  for transport in rdma tcp; do
    echo "== gyre-bench all_reduce, 2 ranks over $transport: 8 B, then 8 B to 4 MiB"
    GYRE_TRANSPORT=$transport GYRE_TIMEOUT=120 "$build/tools/gyre-run" -n 2 \
      "$build/tools/gyre-bench" all_reduce -b 8 -e 8 -n 2000 -w 50 | grep -E '^\[0\] +[0-9]'
    GYRE_TRANSPORT=$transport GYRE_TIMEOUT=120 "$build/tools/gyre-run" -n 2 \
      "$build/tools/gyre-bench" all_reduce -b 8 -e 4M -f 8 -n 30 -w 3
  done
  for flags in "" --register; do
    echo "== gyre-bench sendrecv, 2 ranks over rdma${flags:+, buffers registered (sends from them)}"
    GYRE_TRANSPORT=rdma GYRE_TIMEOUT=120 "$build/tools/gyre-run" -n 2 \
      "$build/tools/gyre-bench" sendrecv -b 64K -e 4M -f 4 -n 30 -w 3 $flags
  done
  exit 0
fi

build=$(cd "${1:-build}" && pwd)
. "$src/tests/collectives/find_rdma_vm.sh"
[ -n "$kit" ] || { echo "rdma_bench: no rdma-vm kit (set GYRE_RDMA_VM to its rdma-vm.sh)" >&2; exit 2; }
exec "$kit" run --timeout 1200 --share "$build" --ro-share "$src" -- \
  bash "$src/tools/bench/rdma_bench.sh" --inside "$build"
