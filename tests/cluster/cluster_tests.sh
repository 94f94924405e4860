#!/usr/bin/env bash
# Jobs across the hosts of a namespace cluster (cluster.sh), the way operators run them: a
# standalone gyre-rendezvous on host 0 and one gyre-run per host. Usage:
#   cluster_tests.sh BIN_DIR CASE     (exit 77, saying why, where namespaces are unavailable)
set -u
bin=$1
case_name=$2
here=$(cd "$(dirname "$0")" && pwd)
run=$bin/gyre-run
walk=$bin/walkthrough
bench=$bin/gyre-bench
# One subnet per case, so cases may run side by side.
case $case_name in
jobs) name=gc1 ;;
link-cut) name=gc2 ;;
host-gone) name=gc3 ;;
loss) name=gc4 ;;
rendezvous-gone) name=gc5 ;;
shaped) name=gc6 ;;
torch) name=gc8 ;;
netem) name=gc9 ;;
*) echo "unknown case $case_name" >&2; exit 2 ;;
esac
cluster() { "$here/cluster.sh" "$name" "$@"; }
why=$(cluster check) || { echo "SKIP: $why"; exit 77; }

out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  cluster down
  rm -rf "$out"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$out"/*; do echo "--- $(basename "$f") ---"; cat "$f"; done
  exit 1
}

export GYRE_SECRET=cluster-test-secret

# start_rendezvous [HOST]: gyre-rendezvous on HOST (default 0); sets $server and $address.
start_rendezvous() {
  local host=${1:-0}
  : >"$out/server"  # a second server's wait must not find the first one's line
  # Not through the function: $! is then gyre-rendezvous itself (each step execs the next).
  "$here/cluster.sh" "$name" exec "$host" "$bin/gyre-rendezvous" --host "$(cluster addr "$host")" --port 0 \
    >"$out/server" 2>&1 &
  server=$!
  pids+=($server)
  for _ in $(seq 400); do grep -q "listening on" "$out/server" 2>/dev/null && break; sleep 0.05; done
  address=$(sed -n 's/^gyre-rendezvous listening on //p' "$out/server")
  [ -n "$address" ] || fail "gyre-rendezvous did not print its address"
}

stop_rendezvous() {
  kill -TERM "$server"
  wait "$server" || fail "gyre-rendezvous exited $? on SIGTERM"
}

# launch K L JOB CMD...: one gyre-run of L ranks on each of K hosts, in the background; the
# pids go to ${node_pids[@]}, each host's output to $out/node<i>.
launch() {
  local k=$1 l=$2 job=$3
  shift 3
  node_pids=()
  for ((i = 0; i < k; i++)); do
    cluster exec $i "$run" -n "$l" --nnodes "$k" --node-rank $i --rendezvous "$address" \
      --job "$job" --grace-ms 2000 -- "$@" >"$out/node$i" 2>&1 &
    node_pids+=($!)
    pids+=($!)
  done
}

# wait_nodes: 0 when every gyre-run of the last launch exited 0.
wait_nodes() {
  local ok=0
  for p in "${node_pids[@]}"; do wait "$p" || ok=1; done
  return $ok
}

# A job of K hosts × L ranks runs the walkthrough and a random soak; shared memory inside a
# host and tcp between hosts, as each rank's INFO line says.
job_case() {
  local k=$1 l=$2
  local n=$((k * l))
  cluster up "$k" || fail "cluster up $k"
  start_rendezvous
  GYRE_DEBUG=INFO GYRE_TIMEOUT=60 launch "$k" "$l" "walk-$k-$l" timeout 120 "$walk"
  wait_nodes || fail "walkthrough on $k hosts × $l failed"
  grep -q "^\[0\] walkthrough: $n ranks, all correct" "$out/node0" ||
    fail "no success line ($k hosts × $l)"
  local expect="shm $((l - 1)), rdma 0, tcp $((n - l))"
  local seen
  seen=$(cat "$out"/node* | grep -c "peers over $expect,")
  [ "$seen" -eq "$n" ] || fail "$seen of $n ranks report 'peers over $expect'"
  GYRE_TIMEOUT=60 launch "$k" "$l" "soak-$k-$l" timeout 120 "$bench" --soak 4 -e 256K --seed $((k * 10 + l))
  wait_nodes || fail "soak on $k hosts × $l failed"
  if [ "$l" -gt 1 ]; then
    # The hierarchical all-reduce, all-gather and reduce-scatter, forced, under the same soak.
    GYRE_ALGO=hier GYRE_TIMEOUT=60 launch "$k" "$l" "hier-$k-$l" timeout 120 "$bench" --soak 4 -e 4M \
      --seed $((k * 10 + l + 1))
    wait_nodes || fail "soak with GYRE_ALGO=hier on $k hosts × $l failed"
    # And the tuner takes it for a large all-reduce on its own.
    GYRE_DEBUG=INFO GYRE_TIMEOUT=60 launch "$k" "$l" "tuned-$k-$l" timeout 120 "$bench" all_reduce \
      -b 16M -e 16M -n 3 -w 1
    wait_nodes || fail "16 MiB all_reduce on $k hosts × $l failed"
    grep -q 'all_reduce of 16777216 B at n=4: hier' "$out/node0" ||
      fail "the tuner did not take the hierarchical all-reduce for 16 MiB"
    for coll in all_gather reduce_scatter; do
      GYRE_DEBUG=INFO GYRE_TIMEOUT=60 launch "$k" "$l" "tuned-$coll-$k-$l" timeout 120 "$bench" \
        $coll -b 16M -e 16M -n 3 -w 1
      wait_nodes || fail "16 MiB $coll on $k hosts × $l failed"
      grep -qE "$coll of [0-9]+ B at n=4: hier" "$out/node0" ||
        fail "the tuner did not take the hierarchical $coll for 16 MiB"
      grep -qE '^\[0\] +16777216 .* 0$' "$out/node0" || fail "16 MiB $coll: no row with 0 wrong"
    done
  fi
  cat "$out"/node* | grep -E 'soak|wrong' | head -4
  stop_rendezvous
  cluster down
  rm -f "$out"/*
}

# start_loop_job [HOSTS [ROUNDS]]: the rendezvous on host 0, or on host 2 of 3 HOSTS, a
# 2 × 2 job of ROUNDS checked 4 MiB all-reduces on hosts 0 and 1; returns once all loop.
start_loop_job() {
  local hosts=${1:-2} rounds=${2:-100000}
  cluster up "$hosts" || fail "cluster up $hosts"
  start_rendezvous $((hosts > 2 ? hosts - 1 : 0))
  GYRE_TIMEOUT=60 launch 2 2 "$case_name" timeout 120 "$walk" --loop "$rounds"
  for _ in $(seq 200); do
    [ "$(cat "$out"/node* | grep -c 'looping')" -eq 4 ] && break
    sleep 0.05
  done
  [ "$(cat "$out"/node* | grep -c 'looping')" -eq 4 ] || fail "the ranks did not all start"
  sleep 0.5
}

# The job ended within $1 ms of $start_ns, every rank of the hosts named after it with an
# error. On host 0, which keeps the rendezvous and so the job's failure record, every rank
# names a rank of host 1 first; on a host cut off from both, at least one rank names a rank
# of host 0 (the others may name the neighbour on their own host that failed before them).
expect_lost() {
  local limit_ms=$1
  shift
  wait_nodes && fail "the job succeeded although a host was lost"
  local ms=$((($(date +%s%N) - start_ns) / 1000000))
  for host in "$@"; do
    local others="[23]" named=0
    [ "$host" -eq 1 ] && others="[01]"
    for r in $((host * 2)) $((host * 2 + 1)); do
      grep -qE "^\[$r\] walkthrough: .*rank [0-9]+ is gone" "$out/node$host" ||
        fail "rank $r did not say which rank it lost"
      grep -qE "^\[$r\] walkthrough: .*: rank $others is gone" "$out/node$host" && named=$((named + 1))
    done
    [ "$host" -eq 0 ] && [ $named -ne 2 ] && fail "a rank of host 0 did not name a rank of host 1"
    [ $named -ge 1 ] || fail "no rank of host $host named a rank of the other host"
  done
  [ "$ms" -lt "$limit_ms" ] || fail "took $ms ms from the fault to the end of the job"
  echo "$case_name: job ended ${ms} ms after the fault"
}

case $case_name in
jobs)
  job_case 2 2
  job_case 3 1
  ;;
link-cut)
  # Host 1's cable is pulled mid-all-reduce: nothing is closed, nothing more arrives.
  start_loop_job
  start_ns=$(date +%s%N)
  cluster link 1 down
  expect_lost 15000 0 1
  ;;
host-gone)
  # Every process of host 1 is killed at once (the host died; its kernel still answers).
  start_loop_job
  start_ns=$(date +%s%N)
  ip netns pids "$name-h1" | xargs -r kill -9
  expect_lost 15000 0
  ;;
rendezvous-gone)
  # The rendezvous has a host of its own, cut off once the job runs: the job finishes.
  start_loop_job 3 300
  start_ns=$(date +%s%N)
  cluster link 2 down
  wait_nodes || fail "the job failed after the rendezvous became unreachable"
  ms=$((($(date +%s%N) - start_ns) / 1000000))
  [ "$(grep -c 'loop: 300 rounds correct' "$out/node0" "$out/node1" | awk -F: '{ s += $2 } END { print s }')" -eq 4 ] ||
    fail "not every rank reported its rounds correct"
  echo "rendezvous-gone: the job ran on for $ms ms after its rendezvous became unreachable"
  ;;
loss)
  # 1 % of every host's tcp packets dropped at the bridge: results stay exact, only slower.
  cluster up 2 || fail "cluster up 2"
  for h in 0 1; do cluster shape $h loss 1 || exit $?; done
  start_rendezvous
  GYRE_TIMEOUT=60 launch 2 2 loss timeout 120 "$bench" --soak 6 -e 4M --seed 7
  wait_nodes || fail "soak under 1 % loss failed"
  grep -h ' 0 wrong elements' "$out/node0" || fail "no soak summary with 0 wrong elements"
  GYRE_TIMEOUT=60 launch 2 2 loss-bench timeout 120 "$bench" all_reduce -b 64K -e 16M -f 16 -n 5 -w 1
  wait_nodes || fail "all_reduce under 1 % loss failed"
  grep -h '^\[0\]' "$out/node0" | tail -4
  ;;
netem)
  # Links with latency (netem: where the kernel has it; CI runs this case in the rdma-vm
  # guest's Debian kernel, cluster.netem-vm). First 200 µs one way with a quarter of the
  # packets overtaking the others, and 1 % lost: results stay exact. Then 4 hosts 1 ms apart:
  # small calls, to set beside the hop count the tuner's algorithm needs (printed, not
  # asserted: the guest is emulated), on netem links of 1 Gbit/s, the datacenter profile's form.
  cluster up 2 || fail "cluster up 2"
  for h in 0 1; do
    cluster shape $h delay 200 reorder 25 || exit $?
    cluster shape $h loss 1 || exit $?
  done
  start_rendezvous
  GYRE_TIMEOUT=120 launch 2 2 netem-soak timeout 300 "$bench" --soak 3 -e 1M --seed 11
  wait_nodes || fail "soak with delay, reordering and loss failed"
  grep -h ' 0 wrong elements' "$out/node0" || fail "no soak summary with 0 wrong elements"
  stop_rendezvous
  cluster down
  cluster up 4 || fail "cluster up 4"
  start_rendezvous
  for delay in 0 1000; do
    for h in 0 1 2 3; do
      if [ $delay = 0 ]; then cluster shape $h clear; else cluster shape $h delay $delay rate 1gbit || exit $?; fi
    done
    if [ $delay != 0 ]; then
      qdisc=$(cluster exec 0 tc qdisc show dev eth0)
      echo "netem: host 0: $qdisc"
      grep -q "netem.*delay.*rate 1Gbit" <<<"$qdisc" || fail "host 0's link is not delayed and rate-limited"
    fi
    for coll in all_reduce broadcast all_gather; do
      GYRE_DEBUG=INFO GYRE_TIMEOUT=120 launch 4 1 "netem-$coll-$delay" timeout 300 "$bench" $coll \
        -b 8 -e 8 -n 20 -w 2
      wait_nodes || fail "8 B $coll on 4 hosts $delay µs apart failed"
      row=$(grep -hE '^\[0\] +[0-9]+ ' "$out/node0") || fail "no row for $coll"
      echo "netem: one way $delay µs: $coll: $(grep -ho "of [0-9]* B at n=4: .*" "$out/node0" | head -1)"
      echo "$row"
    done
  done
  echo "netem: the floor is the algorithm's network hops on the critical path × the one-way delay;"
  echo "netem: the guest is emulated, so the rows without delay say what the emulation costs"
  ;;
shaped)
  # Every host's link at 1 Gbit/s: a large all-reduce reaches the line rate, exactly.
  cluster up 2 || fail "cluster up 2"
  for h in 0 1; do cluster shape $h rate 1gbit || exit $?; done
  start_rendezvous
  GYRE_TIMEOUT=60 launch 2 2 shaped timeout 120 "$bench" all_reduce -b 1M -e 64M -f 8 -n 5 -w 1
  wait_nodes || fail "all_reduce on shaped links failed"
  grep -h '^\[0\]' "$out/node0" | tail -5
  ;;
torch)
  # torch's env:// across machines: MASTER_ADDR names host 0, as under torchrun; rank 0's
  # gyre rendezvous (a unique id in torch's store) listens on host 0's address towards it.
  python=${GYRE_TORCH_PYTHON:?set GYRE_TORCH_PYTHON to the Python gyre_torch was built for}
  export PYTHONPATH="$bin/../python${PYTHONPATH:+:$PYTHONPATH}"
  cluster up 2 || fail "cluster up 2"
  start_rendezvous
  cd "$here/../torch"
  MASTER_ADDR=$(cluster addr 0) MASTER_PORT=29517 GYRE_DEBUG=INFO GYRE_TIMEOUT=60 \
    launch 2 2 torch timeout 120 "$python" bootstrap.py env
  wait_nodes || fail "torch across 2 hosts failed"
  [ "$(cat "$out"/node* | grep -c 'env://: rank [0-3] of 4: all_reduce correct')" -eq 4 ] ||
    fail "not every rank's all_reduce was correct"
  seen=$(cat "$out"/node* | grep -c 'peers over shm 1, rdma 0, tcp 2,')
  [ "$seen" -eq 4 ] || fail "$seen of 4 ranks report shared memory inside a host and tcp across"
  ;;
esac
echo "PASS: $case_name"
