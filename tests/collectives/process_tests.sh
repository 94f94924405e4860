#!/usr/bin/env bash
# Ranks as processes, the way users run them. Usage: process_tests.sh BIN_DIR CASE
set -u
bin=$1
case_name=$2
run=$bin/gyre-run
walk=$bin/walkthrough
out=$(mktemp)
trap 'rm -f "$out" "$out.per-call" "$out.rank1"' EXIT
fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$out"; exit 1; }

# Fails unless each of RANKS printed a line matching the extended regex PATTERN after its
# "[r] " prefix, "@r" in PATTERN standing for that rank. Usage: ranks_printed RANKS PATTERN WHAT
ranks_printed() {
  local r
  for r in $1; do
    grep -qE "^\[$r\] ${2//@r/$r}" "$out" || fail "rank $r $3"
  done
}

# Writes a wrapper that runs its command with VAR=VALUE set on rank 1 alone; prints its path.
rank1_with() {
  printf '#!/bin/sh\n[ "$GYRE_RANK" = 1 ] && export %s\nexec "$@"\n' "$1" >"$out.rank1"
  chmod +x "$out.rank1"
  echo "$out.rank1"
}

# Starts a standalone gyre-rendezvous on a free loopback port (extra arguments go to it);
# sets $server (its pid) and $address (host:port). Its output goes to $out.server.
start_rendezvous() {
  "$bin/gyre-rendezvous" --host 127.0.0.1 --port 0 "$@" >"$out.server" 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q 'listening on' "$out.server" && break; sleep 0.05; done
  address=$(sed -n 's/^gyre-rendezvous listening on //p' "$out.server")
  [ -n "$address" ] || { kill $server; fail "gyre-rendezvous did not print its address"; }
}

# Runs the walkthrough's checked all-reduce loop on N ranks (extra arguments go to it), kills
# rank VICTIM with SIGKILL half a second in, and waits for the job: sets $rc (gyre-run's exit
# status) and $ms (from the kill to the job's end). Usage: kill_in_loop N VICTIM [ARGS...]
kill_in_loop() {
  local n=$1 victim_rank=$2
  shift 2
  GYRE_TIMEOUT=60 timeout 120 "$run" -n "$n" --grace-ms 3000 "$walk" "$@" >"$out" 2>&1 &
  local job=$!
  for _ in $(seq 200); do grep -q "rank $victim_rank pid [0-9]* looping" "$out" && break; sleep 0.05; done
  local victim
  victim=$(sed -n "s/.*rank $victim_rank pid \([0-9]*\) looping.*/\1/p" "$out")
  [ -n "$victim" ] || { kill $job; fail "rank $victim_rank did not start"; }
  sleep 0.5
  local start
  start=$(date +%s%N)
  kill -9 "$victim"
  wait $job
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
}

# After kill_in_loop: gyre-run reported the SIGKILL, every rank in SURVIVORS named VICTIM first
# in a failed COLL, and the job ended within LIMIT_MS of the kill.
expect_named() {
  local victim=$1 coll=$2 survivors=$3 limit_ms=$4 label=$5
  [ "$rc" -eq 137 ] || fail "$label: gyre-run exited $rc, expected 137 (rank $victim killed by SIGKILL)"
  for r in $survivors; do
    grep -qE "^\[$r\] walkthrough: [a-z ]+: rank $victim is gone .*$coll #[0-9]+ " "$out" ||
      fail "$label: rank $r did not name rank $victim first"
  done
  [ "$ms" -lt "$limit_ms" ] || fail "$label: took $ms ms from the kill to the end of the job"
}

case $case_name in
walkthrough)
  # gyre-run with its embedded rendezvous; every rank checks its results.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 "$walk" --init-all --shrink >"$out" 2>&1 || fail "walkthrough exited $?"
  grep -q '^\[0\] walkthrough: 4 ranks, all correct' "$out" || fail "no success line from rank 0"
  ;;
bench)
  # The main job, small: every row must have #wrong = 0.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" all_reduce -b 8 -e 1M -f 32 -n 3 -w 1 >"$out" 2>&1 ||
    fail "gyre-bench exited $?"
  for coll in all_gather reduce_scatter broadcast; do
    GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" $coll -b 8 -e 1M -f 32 -n 3 -w 1 -d bfloat16 >>"$out" 2>&1 ||
      fail "gyre-bench $coll exited $?"
  done
  # Sends and receives around the ring, from registered buffers (direct sends over rdma).
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" sendrecv -b 8 -e 1M -f 32 -n 3 -w 1 --register >>"$out" 2>&1 ||
    fail "gyre-bench sendrecv exited $?"
  # --rewrite stores to every line of each input before each call: the results stay right.
  for coll in "all_reduce --inplace" broadcast; do
    GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" $coll --rewrite -b 8 -e 1M -f 32 -n 3 -w 1 >>"$out" 2>&1 ||
      fail "gyre-bench $coll --rewrite exited $?"
  done
  # Four ranks on two CPUs, pinned in halves: over tcp small broadcasts relay every other call.
  GYRE_TIMEOUT=60 timeout 120 taskset -c 0,1 "$run" -n 4 "$bin/gyre-bench" broadcast -b 8 -e 32K -f 8 -n 9 -w 1 \
    >>"$out" 2>&1 || fail "gyre-bench broadcast on two CPUs exited $?"
  rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
  [ "$rows" -ge 33 ] || fail "expected 33 result rows, got $rows"
  bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
  [ "$bad" -eq 0 ] || fail "$bad rows with #wrong != 0"
  # --per-call: a summary under each row, its percentiles ordered and its call count right.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_gather -b 64K -e 1M -f 16 -n 50 -w 1 \
    --per-call >"$out.per-call" 2>&1 || fail "gyre-bench --per-call exited $?"
  cat "$out.per-call" >>"$out"
  summaries=$(grep -c 'per call, rank 0: p50' "$out.per-call")
  [ "$summaries" -eq 2 ] || fail "expected 2 per-call summaries, got $summaries"
  grep 'per call' "$out.per-call" | sed -E 's/.*p50 ([0-9.]+) p99 ([0-9.]+) p99.9 ([0-9.]+) max ([0-9.]+) us.*: ([0-9]+) of ([0-9]+) .*/\1 \2 \3 \4 \5 \6/' |
    awk '!($1 > 0 && $1 <= $2 && $2 <= $3 && $3 <= $4 && $5 <= $6 && $6 == 50) { bad = 1 } END { exit bad }' ||
    fail "per-call summaries out of order or with a wrong call count"
  # --seconds: the calls per row come from the time asked for, so calls times the row's mean
  # time is about 0.2 s whatever the transport costs (rdma in the emulated guest: ~200 us a
  # call). A fixed count would miss by orders of magnitude either way; the floor is 5 calls.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_reduce -b 8 -e 8 --seconds 0.2 -w 1 \
    --per-call >"$out.seconds" 2>&1 || fail "gyre-bench --seconds exited $?"
  cat "$out.seconds" >>"$out"
  calls=$(sed -nE 's/.*per call, rank 0: .*: [0-9]+ of ([0-9]+) .*/\1/p' "$out.seconds")
  mean_us=$(awk '$1 == "[0]" && $2 == 8 { print $7 }' "$out.seconds")
  [ -n "$calls" ] && [ -n "$mean_us" ] || fail "--seconds: no call count or mean time in the output"
  awk -v c="$calls" -v t="$mean_us" 'BEGIN { s = c * t / 1e6; exit !(c >= 5 && s >= 0.05 && s <= 1.0) }' ||
    fail "--seconds 0.2 ran $calls calls of 8 bytes at $mean_us us each, not about 0.2 s"
  grep -E '^\[0\] +8 ' "$out.seconds" | awk '$NF != 0 { bad = 1 } END { exit bad }' ||
    fail "--seconds: #wrong != 0"
  # --peer-iters: the peer benchmarks' count instead, at most 1000 calls (8 B take far less
  # than 0.2 ms each), and only with --seconds.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_reduce -b 8 -e 8 --seconds 0.2 \
    --peer-iters -w 1 --per-call >"$out.seconds" 2>&1 || fail "gyre-bench --peer-iters exited $?"
  cat "$out.seconds" >>"$out"
  calls=$(sed -nE 's/.*per call, rank 0: .*: [0-9]+ of ([0-9]+) .*/\1/p' "$out.seconds")
  [ "$calls" = 1000 ] || fail "--peer-iters ran ${calls:-no} calls of 8 bytes, not 1000"
  if "$bin/gyre-bench" all_reduce --peer-iters >"$out.seconds" 2>&1; then
    fail "--peer-iters without --seconds was accepted"
  fi
  grep -q -- '--peer-iters needs --seconds' "$out.seconds" || fail "--peer-iters: no reason given"
  # The peers' bounds where a script passes theirs: a floor over a short target, a ceiling, and
  # a time limit that leaves the 3 calls every row keeps.
  for bounds in "7 -b 1M -e 1M --seconds 0.00001 --peer-min-iters 7" \
    "50 -b 8 -e 8 --seconds 0.2 --peer-max-iters 50" \
    "3 -b 8 -e 8 --seconds 0.2 --peer-max-s 0.0000001"; do
    set -- $bounds
    want=$1
    shift
    GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_reduce --peer-iters -w 1 \
      --per-call "$@" >"$out.seconds" 2>&1 || fail "gyre-bench $* exited $?"
    cat "$out.seconds" >>"$out"
    calls=$(sed -nE 's/.*per call, rank 0: .*: [0-9]+ of ([0-9]+) .*/\1/p' "$out.seconds")
    [ "$calls" = "$want" ] || fail "gyre-bench --peer-iters $* ran ${calls:-no} calls, not $want"
  done
  if "$bin/gyre-bench" all_reduce --seconds 0.2 --peer-max-iters 50 >"$out.seconds" 2>&1; then
    fail "--peer-max-iters without --peer-iters was accepted"
  fi
  grep -q -- 'need --peer-iters' "$out.seconds" || fail "--peer-max-iters: no reason given"
  ;;
failing-rank)
  # Rank 1 exits 3 mid-job: the others fail naming it, gyre-run reports it and exits 3.
  start=$(date +%s)
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$walk" --fail-rank 1 --exit-code 3 >"$out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  [ "$rc" -eq 3 ] || fail "gyre-run exited $rc, expected 3"
  grep -q 'gyre-run: rank 1 failed (exit code 3)' "$out" || fail "gyre-run did not name rank 1"
  # Every surviving rank's error starts with the lost rank, then names the operation and
  # how it was noticed (the first detector's cause).
  ranks_printed "0 2 3" "walkthrough: [a-z ]+: rank 1 is gone .*all_reduce #1 .*(send to |receive from )?rank 1 failed over ${GYRE_TRANSPORT:-shm}" \
    "did not report an error naming rank 1 first, then the operation"
  [ "$elapsed" -lt 30 ] || fail "took ${elapsed}s: errors must come well inside the 60 s timeout"
  # With several channels the call opens its channels' connections first (hosts with cores to
  # spare): to a peer already gone they fail as fast, naming it and the call.
  GYRE_CHANNELS=4 GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$walk" --fail-rank 1 \
    --exit-code 3 >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 3 ] || fail "with 4 channels: gyre-run exited $rc, expected 3"
  ranks_printed "0 2 3" "walkthrough: [a-z ]+: rank 1 is gone .*all_reduce #1 .*rank 1 failed over ${GYRE_TRANSPORT:-shm}" \
    "with 4 channels: did not report an error naming rank 1 first, then the operation"
  # Rank 1 leaves with exit code 0: it failed nobody's exit code, but it is still the cause.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$walk" --fail-rank 1 --exit-code 0 >"$out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "gyre-run exited 0 although ranks failed"
  grep -q 'gyre-run: job failed; rank 1 ended (exit code 0) while the others still ran, then rank [023] failed first' "$out" ||
    fail "gyre-run did not name rank 1, which left early, first"
  ranks_printed "0 2 3" "walkthrough: [a-z ]+: rank 1 is gone " "did not name rank 1 first after it left with exit code 0"
  ;;
signal)
  # SIGTERM to gyre-run reaches every rank; gyre-run exits with 128+15.
  GYRE_TIMEOUT=60 "$run" -n 2 sleep 30 >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 50); do [ "$(pgrep -c -P $pid)" -ge 2 ] && break; sleep 0.1; done
  kill -TERM $pid
  wait $pid
  rc=$?
  [ "$rc" -eq 143 ] || fail "gyre-run exited $rc after SIGTERM, expected 143"
  [ -z "$(pgrep -P $pid)" ] || fail "ranks left running"
  ;;
bind)
  # gyre-run gives each rank its own CPUs when there are enough, and none when asked not to.
  allowed=$(taskset -pc $$ | sed 's/.*: //')
  cpus=$(nproc)
  "$run" -n 2 sh -c 'taskset -pc $$' >"$out" 2>&1 || fail "gyre-run exited $?"
  first=$(sed -n 's/^\[0\] .*: //p' "$out")
  second=$(sed -n 's/^\[1\] .*: //p' "$out")
  if [ "$cpus" -ge 2 ]; then
    [ -n "$first" ] && [ -n "$second" ] && [ "$first" != "$second" ] ||
      fail "ranks 0 and 1 run on '$first' and '$second'; expected shares of their own"
    [ "$first" != "$allowed" ] || fail "rank 0 was not bound (it has all of $allowed)"
  else
    echo "one CPU: checking only that binding is skipped"
    [ "$first" = "$allowed" ] || fail "with one CPU rank 0 should keep $allowed, has '$first'"
  fi
  "$run" -n 2 --bind none sh -c 'taskset -pc $$' >"$out" 2>&1 || fail "gyre-run --bind none exited $?"
  for r in 0 1; do
    got=$(sed -n "s/^\[$r\] .*: //p" "$out")
    [ "$got" = "$allowed" ] || fail "--bind none: rank $r has '$got', expected $allowed"
  done
  # More ranks than CPUs: consecutive ranks share one CPU, the first and the last apart.
  n=$((2 * cpus))
  "$run" -n $n sh -c 'taskset -pc $$' >"$out" 2>&1 || fail "gyre-run -n $n exited $?"
  first=$(sed -n 's/^\[0\] .*: //p' "$out")
  second=$(sed -n 's/^\[1\] .*: //p' "$out")
  last=$(sed -n "s/^\[$((n - 1))\] .*: //p" "$out")
  if [ "$cpus" -ge 2 ]; then
    case $first in *[,-]* | "") fail "$n ranks on $cpus CPUs: rank 0 has '$first', expected one CPU" ;; esac
    [ "$first" = "$second" ] || fail "$n ranks on $cpus CPUs: ranks 0 and 1 on '$first' and '$second', expected one"
    [ "$first" != "$last" ] || fail "$n ranks on $cpus CPUs: ranks 0 and $((n - 1)) both on '$first'"
    # The communicator sees the blocks (its tuner then sends broadcasts and reduces down trees),
    # and sees none where the scheduler places the ranks.
    GYRE_DEBUG=INFO "$run" -n $n "$walk" >"$out" 2>&1 || fail "walkthrough, $n ranks bound, exited $?"
    for r in 0 $((n - 1)); do
      grep -qE "^\[$r\] .*rank $r of $n: ready.*\(ranks share cores, pinned in blocks\)" "$out" ||
        fail "$n ranks bound in blocks: rank $r's communicator did not see its ranks pinned"
    done
    # Rank 0 probes the CPU of the next block's first rank (rank 2) at set-up and during calls
    # (every 10 ms of predicted time here), and the slots' stores follow: results stay exact.
    GYRE_DEBUG=INFO GYRE_PLACEMENT_PROBE_MS=1 timeout 120 "$run" -n $n "$bin/gyre-bench" scatter \
      -b 256K -e 1M -f 4 -n 200 -w 2 >"$out" 2>&1 || fail "scatter, $n ranks bound, exited $?"
    grep -qE '^\[0\] .*rank 0: a cache line between the CPUs of ranks 0 and 2 goes there and back in [1-9][0-9]* ns' "$out" ||
      fail "$n ranks bound in blocks: rank 0 did not probe rank 2's CPU"
    rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
    bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
    [ "$rows" -eq 2 ] && [ "$bad" -eq 0 ] || fail "$n ranks bound in blocks: $rows rows, $bad with wrong elements"
    GYRE_DEBUG=INFO "$run" -n $n --bind none "$walk" >"$out" 2>&1 || fail "walkthrough, $n ranks unbound, exited $?"
    grep -qE "rank 0 of $n: ready" "$out" || fail "$n ranks unbound: rank 0 logged no set-up"
    ! grep -q "pinned in blocks" "$out" || fail "$n ranks unbound: a communicator took them for pinned"
    ! grep -q "there and back" "$out" || fail "$n ranks unbound on shared cores: rank 0 probed the scheduler"
  else
    [ "$first" = "$allowed" ] || fail "with one CPU rank 0 should keep $allowed, has '$first'"
  fi
  ;;
torch-env)
  # torch-style variables: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT.
  for attempt in 1 2 3; do
    : >"$out"
    port=$(( 20000 + RANDOM % 20000 ))
    pids=()
    for r in 0 1 2; do
      RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GYRE_TIMEOUT=30 \
        timeout 60 "$walk" >>"$out" 2>&1 &
      pids+=($!)
    done
    ok=1
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    [ $ok -eq 1 ] && break
    grep -q 'cannot listen' "$out" || fail "torch-style init failed"
  done
  [ $ok -eq 1 ] || fail "torch-style init failed 3 times"
  grep -q 'walkthrough: 3 ranks, all correct' "$out" || fail "no success line"
  # No GYRE_SECRET here: every rank says once that its connections are unauthenticated.
  for r in 0 1 2; do
    [ "$(grep -c "rank $r: job 'default' has no secret, so its connections are not authenticated.*GYRE_SECRET" "$out")" -eq 1 ] ||
      fail "rank $r did not warn exactly once about the missing secret"
  done
  ;;
multi-node)
  # A standalone gyre-rendezvous and two "machines" (two gyre-run) of 2 ranks each.
  start_rendezvous
  for node in 0 1; do
    GYRE_TIMEOUT=60 GYRE_SOCKET_IFNAME=lo timeout 120 "$run" -n 2 --nnodes 2 --node-rank $node \
      --rendezvous "$address" --job multi-node-test -- "$walk" >"$out.$node" 2>&1 &
    pids[$node]=$!
  done
  ok=1
  for node in 0 1; do wait "${pids[$node]}" || ok=0; done
  kill -TERM $server
  wait $server
  server_rc=$?
  cat "$out.0" "$out.1" "$out.server" >"$out"
  rm -f "$out.0" "$out.1" "$out.server"
  [ $ok -eq 1 ] || fail "a node failed"
  grep -q '^\[0\] walkthrough: 4 ranks, all correct' "$out" || fail "no success line from global rank 0"
  [ "$server_rc" -eq 0 ] || fail "gyre-rendezvous exited $server_rc on SIGTERM"
  ;;
kill9)
  # kill -9 one rank in the middle of large all-reduces (n = 4): every other rank fails
  # naming it, well inside the 60 s timeout, and gyre-run reports the signal.
  kill_in_loop 4 2 --loop 2000
  [ "$rc" -eq 137 ] || fail "gyre-run exited $rc, expected 137 (rank 2 killed by SIGKILL)"
  grep -q 'gyre-run: rank 2 failed (signal 9 (SIGKILL))' "$out" || fail "gyre-run did not name rank 2 and SIGKILL"
  for r in 0 1 3; do
    grep -qE "^\[$r\] walkthrough: [a-z ]+: rank 2 is gone .*all_reduce #[0-9]+ .*rank 2 failed over ${GYRE_TRANSPORT:-shm}" "$out" ||
      fail "rank $r did not name rank 2 first"
  done
  [ "$ms" -lt 15000 ] || fail "took $ms ms from the kill to the end of the job"
  echo "kill9: job ended ${ms} ms after the kill (including gyre-run's grace period)"
  ;;
kill9-single-copy)
  # The same in loops of large all-gathers (n = 2) and broadcasts (n = 3, the root killed),
  # where receivers read the senders' buffers straight over shared memory: the survivors fail
  # naming the killed rank, whether they were reading its memory or waiting for it to read
  # theirs.
  # A survivor may see its reader's process gone before gyre-run can reap it: gyre-run still
  # names the killed rank first when it dies within moments of a rank that exited with an error.
  "$run" -n 2 -- sh -c 'if [ "$RANK" = 0 ]; then exit 2; fi; sleep 0.05; kill -9 $$' >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 137 ] && grep -q 'rank 1 failed first (signal 9 (SIGKILL)); rank 0: exit code 2' "$out" ||
    fail "gyre-run did not name the rank killed 50 ms after another failed (exit $rc)"
  kill_in_loop 2 1 --loop 2000 --loop-coll all_gather
  expect_named 1 all_gather 0 15000 all_gather
  kill_in_loop 3 0 --loop 2000 --loop-coll broadcast
  expect_named 0 broadcast "1 2" 15000 broadcast
  echo "kill9-single-copy: both jobs ended within 15 s of the kill"
  ;;
oneshot)
  # Small calls go through the host window: the tuner says so (a reduce only where ranks have
  # cores of their own, so it is forced here), every element is checked; then a rank killed in
  # a loop of 8-byte all-reduces is named by every other rank within moments.
  for coll in all_reduce broadcast all_gather reduce reduce_scatter; do
    algo=auto
    [ $coll = reduce ] && algo=oneshot
    GYRE_ALGO=$algo GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" $coll \
      -b 24 -e 48K -f 8 -n 20 -w 2 >"$out" 2>&1 || fail "gyre-bench $coll exited $?"
    grep -q "$coll of 24 B at n=3: oneshot" "$out" || fail "$coll of 24 B did not use the host window"
    rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
    bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
    [ "$rows" -eq 4 ] && [ "$bad" -eq 0 ] || fail "$coll: $rows rows, $bad with #wrong != 0"
  done
  # A rank set to GYRE_ONESHOT_BYTES=0 declines the window: none is used, nobody waits for it.
  wrapper=$(rank1_with GYRE_ONESHOT_BYTES=0)
  start=$(date +%s%N)
  GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$wrapper" "$bin/gyre-bench" all_reduce \
    -b 24 -e 24 -n 20 -w 2 >"$out" 2>&1 || fail "gyre-bench with rank 1 declining exited $?"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  grep -q "rank 0: no host window: GYRE_ONESHOT_BYTES=0 on rank 1" "$out" || fail "rank 0 did not say why no window"
  ! grep -q "oneshot" "$out" || fail "a window was used although rank 1 declined it"
  bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
  [ "$(grep -cE '^\[0\] +[0-9]+ ' "$out")" -eq 1 ] && [ "$bad" -eq 0 ] || fail "with rank 1 declining: wrong results"
  [ "$ms" -lt 20000 ] || fail "with rank 1 declining the job took $ms ms: a rank waited for it"
  # Two ranks with a core each: rank 0 measures how far apart their CPUs sit over the window,
  # and both price their calls with its figure: they pick the same algorithm.
  if [ "$(nproc)" -ge 2 ]; then
    GYRE_DEBUG=INFO timeout 60 "$run" -n 2 "$bin/gyre-bench" all_reduce -b 1M -e 1M -n 5 -w 1 >"$out" 2>&1 ||
      fail "gyre-bench all_reduce at n=2 exited $?"
    grep -qE '^\[0\] .*rank 0: a cache line between the CPUs of ranks 0 and 1 goes there and back in [1-9][0-9]* ns' "$out" ||
      fail "rank 0 did not measure the round trip between the ranks' CPUs"
    # Each rank logs its pick once per algorithm: a probe during calls that finds the CPUs moved
    # makes both log the other placement's pick, in the same order.
    picks() { grep -oE "rank $1: all_reduce of 1048576 B at n=2: [a-z]+" "$out" | sed "s/rank $1: //"; }
    [ -n "$(picks 0)" ] && [ "$(picks 0)" = "$(picks 1)" ] ||
      fail "ranks 0 and 1 picked different algorithms for 1 MiB"
  else
    echo "oneshot: the round-trip probe is not checked: one core, no rank has a core of its own"
  fi
  kill_in_loop 3 1 --loop 100000000 --loop-count 2
  expect_named 1 all_reduce "0 2" 10000 oneshot
  echo "oneshot: job ended ${ms} ms after the kill (including gyre-run's grace period)"
  # The direct-read collectives, forced: all-reduces in place across several 4 MiB blocks and
  # out of place, all-gathers and broadcasts (from rank 1) both ways, every element checked;
  # then a rank killed in a loop of each is named by the others.
  GYRE_ALGO=read GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" all_reduce \
    -b 12 -e 10M -f 9.3 -n 2 -w 1 --inplace -d int32 >"$out" 2>&1 || fail "gyre-bench --inplace exited $?"
  if grep -q "no direct-read collectives" "$out"; then
    echo "oneshot: the direct read is not checked: $(grep -o 'no direct-read collectives.*' "$out" | head -1)"
  else
    GYRE_ALGO=read GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_reduce \
      -b 12 -e 10M -f 9.3 -n 2 -w 1 -d float -o avg >>"$out" 2>&1 || fail "gyre-bench (read) exited $?"
    [ "$(grep -cE 'all_reduce of [0-9]+ B at n=[23]: read \(forced' "$out")" -ge 10 ] ||
      fail "the all-reduces did not use the direct read"
    rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
    bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
    [ "$rows" -eq 14 ] && [ "$bad" -eq 0 ] || fail "direct read: $rows rows, $bad with #wrong != 0"
    for coll in all_gather broadcast; do
      for place in "" --inplace; do
        GYRE_ALGO=read GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" \
          $coll -b 12 -e 10M -f 9.3 -n 2 -w 1 -r 1 -d int8 $place >"$out" 2>&1 ||
          fail "gyre-bench $coll $place (read) exited $?"
        [ "$(grep -cE "$coll of [0-9]+ B at n=3: read \(forced" "$out")" -ge 5 ] ||
          fail "the ${coll}s did not use the direct read"
        rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
        bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
        [ "$rows" -eq 7 ] && [ "$bad" -eq 0 ] || fail "direct read $coll $place: $rows rows, $bad wrong"
      done
    done
    GYRE_ALGO=read kill_in_loop 3 2 --loop 100000000 --loop-count 300000
    expect_named 2 all_reduce "0 1" 10000 "direct read"
    GYRE_ALGO=read kill_in_loop 3 1 --loop 100000000 --loop-coll all_gather --loop-count 300000
    expect_named 1 all_gather "0 2" 10000 "direct read all_gather"
    GYRE_ALGO=read kill_in_loop 3 0 --loop 100000000 --loop-coll broadcast --loop-count 300000
    expect_named 0 broadcast "1 2" 10000 "direct read broadcast"
    echo "oneshot: direct read: each job ended within 10 s of the kill"
  fi
  ;;
stop)
  # A rank stops itself (SIGSTOP) between two collectives: the others time out naming it and
  # what it last completed; gyre-run kills the stopped rank after its grace periods.
  GYRE_TIMEOUT=3 timeout 60 "$run" -n 3 --grace-ms 500 "$walk" --loop 50 --stop-rank 2 --stop-after 5 >"$out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "the job succeeded with a stopped rank"
  [ "$rc" -ne 124 ] || fail "the job hung"
  for r in 0 1; do
    grep -qE "^\[$r\] walkthrough: .*rank 2 never entered all_reduce #6 \(its last completed: all_reduce #5" "$out" ||
      fail "rank $r did not attribute the timeout to rank 2"
  done
  ;;
setup-failure)
  # Rank 1 fails after the rendezvous, while the others still connect: each of them names rank
  # 1 and its reason, fast. Its failure: it alone requires rdma, on a host with no device.
  if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
    echo "setup-failure: this host has an RDMA device, so rank 1 would not fail; skipped"
    exit 0
  fi
  wrapper=$(rank1_with GYRE_TRANSPORT=rdma)
  start=$(date +%s)
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$wrapper" "$walk" >"$out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "the job succeeded although rank 1 could not set up"
  # gyre-run sees only exit codes: whichever rank exits first may be the one it names.
  grep -qE '^\[1\] walkthrough: invalid usage: rank 1: GYRE_TRANSPORT=rdma but' "$out" ||
    fail "rank 1 did not say why it failed"
  # Where each is: setting up, or in the first call where rank 1 accepted its connection early.
  ranks_printed "0 2 3" "walkthrough: invalid usage: rank @r: (setting up the communicator|all_reduce #1 .*) failed because rank 1 failed first: rank 1: GYRE_TRANSPORT=rdma" \
    "did not name rank 1 and its reason"
  [ $(( $(date +%s) - start )) -lt 30 ] || fail "took too long: errors must come well inside the 60 s timeout"
  ;;
mismatch)
  # Ranks that disagree fail with invalid usage, fast, whatever they disagree on.
  for kind in count dtype op root kind; do
    start=$(date +%s)
    GYRE_TIMEOUT=30 timeout 60 "$run" -n 3 "$walk" --mismatch $kind >"$out" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] || fail "$kind mismatch: the job succeeded"
    [ $(( $(date +%s) - start )) -lt 15 ] || fail "$kind mismatch: not detected well before the timeout"
    grep -q 'invalid usage: .*ranks disagree' "$out" || fail "$kind mismatch: no 'ranks disagree' error"
  done
  # A setting that picks the algorithm, set on one rank only: every rank names it at set-up.
  wrapper=$(rank1_with GYRE_ALGO=ring)
  GYRE_TIMEOUT=30 timeout 60 "$run" -n 3 "$wrapper" "$walk" >"$out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "GYRE_ALGO on rank 1 only: the job succeeded"
  ranks_printed "0 2" "walkthrough: invalid usage: rank @r: ranks disagree: rank 1 has algorithm ring, rank @r has auto \(GYRE_ALGO" \
    "did not name rank 1's GYRE_ALGO"
  ranks_printed 1 "walkthrough: invalid usage: rank 1: ranks disagree: rank 0 has algorithm auto, rank 1 has ring" \
    "did not name rank 0's GYRE_ALGO"
  ;;
joins)
  # Processes that do not fit the job are named by every rank, well before the timeout.
  start_rendezvous --secret s3
  export GYRE_RENDEZVOUS=$address GYRE_SECRET=s3 GYRE_TIMEOUT=30
  # 1. Two processes given rank 1 of a 2-rank job: the second claimant names both.
  start=$(date +%s)
  pids=()
  for r in 0 1 1; do
    # (GYRE_TIMEOUT=8: a straggler that finds the job gone waits alone inside the bound)
    GYRE_TIMEOUT=8 GYRE_JOB_ID=dup GYRE_RANK=$r GYRE_WORLD_SIZE=2 timeout 60 "$walk" --loop 200 >>"$out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  grep -qE "rank 1 of job 'dup' was claimed twice: by pid [0-9]+ on .* and by pid [0-9]+" "$out" ||
    fail "the duplicate rank 1 was not named"
  [ $(( $(date +%s) - start )) -lt 20 ] || fail "duplicate rank: not detected well before the timeout"
  # 2. Ranks that disagree on the world size: both say what differed, the waiting one too.
  : >"$out"
  start=$(date +%s)
  GYRE_JOB_ID=sizes GYRE_RANK=0 GYRE_WORLD_SIZE=2 timeout 60 "$walk" >"$out.0" 2>&1 &
  p0=$!
  GYRE_JOB_ID=sizes GYRE_RANK=1 GYRE_WORLD_SIZE=3 timeout 60 "$walk" >"$out.1" 2>&1 &
  p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
  cat "$out.0" "$out.1" >"$out"
  rm -f "$out.0" "$out.1"
  [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] || fail "a rank of a job with two world sizes succeeded"
  [ $(( $(date +%s) - start )) -lt 15 ] || fail "world sizes: not detected well before the timeout"
  [ "$(grep -c 'ranks disagree: rank [01] says the communicator has [23] ranks, rank [01] says [23]' "$out")" -eq 2 ] ||
    fail "not every rank said which world sizes differed"
  # 3. Two 2-rank jobs launched with one job id (a unique id shared by two jobs): the
  #    ranks that lose the claim name it; nothing hangs.
  : >"$out"
  start=$(date +%s)
  pids=()
  #    A process that starts after the others all left meets a fresh job (the server forgot
  #    it) and times out waiting alone: GYRE_TIMEOUT=8 keeps that inside the bound.
  for r in 0 1 0 1; do
    GYRE_TIMEOUT=8 GYRE_JOB_ID=twice GYRE_RANK=$r GYRE_WORLD_SIZE=2 timeout 60 "$walk" --loop 200 >>"$out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  [ "$(grep -c "of job 'twice' was claimed twice" "$out")" -ge 2 ] ||
    fail "the two jobs sharing an id were not named by the ranks left out"
  [ $(( $(date +%s) - start )) -lt 20 ] || fail "shared id: not detected well before the timeout"
  unset GYRE_RENDEZVOUS GYRE_SECRET GYRE_TIMEOUT
  kill $server
  rm -f "$out.server"
  ;;
rendezvous-killed)
  # The rendezvous dies after init: running collectives go on; a new communicator fails clearly.
  start_rendezvous --secret s3
  GYRE_TIMEOUT=5 timeout 120 "$run" -n 3 --rendezvous "$address" --secret s3 -- "$walk" --loop 300 --second-comm >"$out" 2>&1 &
  job=$!
  for _ in $(seq 200); do [ "$(grep -c 'looping' "$out")" -ge 3 ] && break; sleep 0.05; done
  kill -9 $server
  wait $job
  rc=$?
  rm -f "$out.server"
  [ "$rc" -eq 0 ] || fail "the job failed after the rendezvous died (exit $rc)"
  [ "$(grep -c 'loop: 300 rounds correct' "$out")" -eq 3 ] || fail "collectives did not all complete"
  [ "$(grep -c 'second communicator: .*rendezvous' "$out")" -eq 3 ] ||
    fail "a new communicator did not fail with a clear rendezvous error"
  ;;
tcp-congestion)
  # Tcp data connections between ranks of one host use a window-based congestion control
  # (cubic, else reno) whatever the system default; GYRE_TCP_CONGESTION overrides it, and a
  # name the kernel refuses is an error at init that says what the host allows.
  GYRE_TRANSPORT=tcp GYRE_DEBUG=TRACE GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$walk" >"$out" 2>&1 ||
    fail "walkthrough over tcp exited $?"
  [ "$(grep -cE 'tcp to rank [0-9] channel 0 uses congestion control (cubic|reno)$' "$out")" -eq 6 ] ||
    fail "not every tcp connection uses cubic or reno"
  system=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
  GYRE_TCP_CONGESTION=system GYRE_TRANSPORT=tcp GYRE_DEBUG=TRACE GYRE_TIMEOUT=60 timeout 120 \
    "$run" -n 2 "$walk" >"$out" 2>&1 || fail "walkthrough with GYRE_TCP_CONGESTION=system exited $?"
  [ "$(grep -c "uses congestion control $system\$" "$out")" -eq 2 ] ||
    fail "GYRE_TCP_CONGESTION=system did not keep the system's $system"
  GYRE_TCP_CONGESTION=reno GYRE_TRANSPORT=tcp GYRE_DEBUG=TRACE GYRE_TIMEOUT=60 timeout 120 \
    "$run" -n 2 "$walk" >"$out" 2>&1 || fail "walkthrough with GYRE_TCP_CONGESTION=reno exited $?"
  [ "$(grep -c 'uses congestion control reno$' "$out")" -eq 2 ] || fail "reno was not used"
  GYRE_TCP_CONGESTION=nosuch GYRE_TRANSPORT=tcp GYRE_TIMEOUT=20 timeout 60 "$run" -n 2 "$walk" >"$out" 2>&1 &&
    fail "an unknown congestion control was accepted"
  grep -q "rank [01]: cannot use tcp congestion control 'nosuch' (GYRE_TCP_CONGESTION) for the connection to rank [01]: this kernel has none of that name (this host allows: .*reno" "$out" ||
    fail "no clear error for an unknown congestion control"
  GYRE_TCP_CONGESTION='bad name' timeout 60 "$run" -n 1 "$walk" >"$out" 2>&1 &&
    fail "a malformed congestion control name was accepted"
  grep -q "tcp congestion control 'bad name' (GYRE_TCP_CONGESTION) is not auto, system or the name" "$out" ||
    fail "no clear error for a malformed name"
  ;;
shm-fallback)
  # Shared memory that cannot be used: a warning, then tcp; with GYRE_TRANSPORT=shm, a clear
  # error instead. A /dev/shm with room for only some segments: those connections fall back.
  GYRE_SHM_DIR=/nonexistent/shm GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$walk" >"$out" 2>&1 ||
    fail "walkthrough without usable shared memory exited $?"
  grep -q '^\[0\] walkthrough: 3 ranks, all correct' "$out" || fail "no success line without shared memory"
  grep -q 'shared memory unusable (/nonexistent/shm: No such file or directory); peers on this host use tcp' "$out" ||
    fail "no warning about the unusable directory"
  GYRE_TRANSPORT=shm GYRE_SHM_DIR=/nonexistent/shm GYRE_TIMEOUT=20 timeout 60 "$run" -n 2 "$walk" >"$out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] || fail "GYRE_TRANSPORT=shm succeeded without shared memory"
  grep -q 'GYRE_TRANSPORT=shm but rank [01] cannot be reached over shared memory: this rank: /nonexistent/shm' "$out" ||
    fail "GYRE_TRANSPORT=shm did not say why it failed"
  small=$(mktemp -d)
  if mount -t tmpfs -o size=3m gyre-test "$small" 2>/dev/null; then
    # Segments of 8 x 64 KiB slots each way: ~1 MiB; four ring connections need ~4 MiB.
    GYRE_SHM_DIR=$small GYRE_SLOT_BYTES=65536 GYRE_DEBUG=TRACE GYRE_TIMEOUT=60 timeout 120 \
      "$run" -n 4 "$walk" >"$out" 2>&1
    rc=$?
    left=$(ls "$small" | wc -l)
    umount "$small"
    [ "$rc" -eq 0 ] || fail "walkthrough with a small shared-memory directory exited $rc"
    grep -q 'connected to rank [0-9]* channel 0 over shm' "$out" || fail "no connection used shm"
    grep -qE 'cannot reserve [0-9]+ KiB in .*: No space left on device; this connection uses tcp' "$out" ||
      fail "no connection fell back to tcp with a clear warning"
    [ "$left" -eq 0 ] || fail "$left segments left in the small directory"
  else
    echo "shm-fallback: the small-directory case needs to mount a tmpfs (root); skipped"
  fi
  rmdir "$small"
  ;;
soak)
  # Random verified collectives for a few seconds (the note reports a 10-minute run).
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" --soak 5 -e 1M --seed 11 >"$out" 2>&1 ||
    fail "soak exited $?"
  grep -qE '^\[0\] soak: .* 0 wrong elements' "$out" || fail "soak found wrong elements"
  ;;
strangers)
  # While a job runs, a stranger connects to every listening port (data plane and rendezvous)
  # and sends garbage, a handshake with the right magic and a made-up proof, or nothing. The
  # job's results stay exact and every visit is refused.
  start_rendezvous --secret s3
  GYRE_DEBUG=INFO GYRE_TIMEOUT=30 timeout 120 "$run" -n 3 --rendezvous "$address" --secret s3 -- \
    "$walk" --loop 400 >"$out" 2>&1 &
  job=$!
  for _ in $(seq 200); do [ "$(grep -c 'ready, listening on' "$out")" -ge 3 ] && break; sleep 0.05; done
  ports="$(sed -n 's/.*ready, listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$out") ${address##*:}"
  visits=0
  while kill -0 $job 2>/dev/null && [ $visits -lt 300 ]; do
    for p in $ports; do
      { exec 3<>"/dev/tcp/127.0.0.1/$p"; } 2>/dev/null || continue
      case $(( visits % 3 )) in
        0) head -c 2048 /dev/urandom >&3 2>/dev/null ;;
        1) { printf 'GYRD\003\000\000\000'; head -c 200 /dev/urandom; } >&3 2>/dev/null ;;
        2) sleep 0.02 ;;
      esac
      exec 3>&-
      visits=$((visits + 1))
    done
  done
  wait $job
  rc=$?
  kill -TERM $server
  wait $server
  cat "$out.server" >>"$out"
  rm -f "$out.server"
  [ "$rc" -eq 0 ] || fail "the job failed while strangers visited (exit $rc)"
  [ "$(grep -c 'loop: 400 rounds correct' "$out")" -eq 3 ] || fail "wrong results under visits"
  [ $visits -ge 30 ] || fail "only $visits visits happened while the job ran"
  grep -q 'refused a data connection' "$out" || fail "no refusal logged by the ranks"
  grep -q 'rendezvous: closed client' "$out" || fail "no refusal logged by the rendezvous"
  echo "strangers: $visits hostile connections during the job"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS: $case_name"
