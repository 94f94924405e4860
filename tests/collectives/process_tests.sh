#!/usr/bin/env bash
# Ranks as processes, the way users run them. Usage: process_tests.sh BIN_DIR CASE
set -u
source "$(dirname "$0")/process_lib.sh"

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
  # Five ranks there, blocks of three and two: over tcp broadcasts take the chain, from rank 0
  # the way round that goes to rank 4 first (the other block), from rank 3 the usual way.
  for root in 0 3; do
    GYRE_TIMEOUT=60 timeout 120 taskset -c 0,1 "$run" -n 5 "$bin/gyre-bench" broadcast -r $root \
      -b 8 -e 1M -f 64 -n 5 -w 1 >>"$out" 2>&1 || fail "gyre-bench broadcast from $root exited $?"
  done
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
  # --gap-us: 20 calls, each followed by 5 ms asleep on every rank; the time shown is the calls'
  # own, so far below the gap, while the run takes the gaps' 100 ms at least.
  start=$(date +%s%N)
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 2 "$bin/gyre-bench" all_reduce -b 8 -e 8 -n 20 -w 1 \
    --gap-us 5000 >"$out.gap" 2>&1 || fail "gyre-bench --gap-us exited $?"
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  cat "$out.gap" >>"$out"
  gap_us=$(awk '$1 == "[0]" && $2 == 8 { print $7 }' "$out.gap")
  [ -n "$gap_us" ] || fail "--gap-us: no time in the output"
  awk -v t="$gap_us" -v e="$elapsed_ms" 'BEGIN { exit !(t > 0 && t < 2500 && e >= 100) }' ||
    fail "--gap-us 5000: $gap_us us a call over ${elapsed_ms} ms, not the calls' own time"
  grep -E '^\[0\] +8 ' "$out.gap" | awk '$NF != 0 { bad = 1 } END { exit bad }' ||
    fail "--gap-us: #wrong != 0"
  if "$bin/gyre-bench" all_reduce --gap-us 10 --seconds 0.1 >"$out.gap" 2>&1; then
    fail "--gap-us with --seconds was accepted"
  fi
  grep -q -- '--gap-us times -n host calls' "$out.gap" || fail "--gap-us: no reason given"
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
  # GYRE_ALGO=pairwise keeps even a small all-to-all on the links' exchange, every element
  # checked; a name that is no algorithm's fails set-up saying which names are.
  GYRE_ALGO=pairwise GYRE_DEBUG=INFO GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$bin/gyre-bench" \
    all_to_all -b 24 -e 48K -f 8 -n 20 -w 2 >"$out" 2>&1 || fail "forced pairwise all_to_all exited $?"
  grep -qE "all_to_all of [0-9]+ B at n=3: pairwise \(forced by GYRE_ALGO\)" "$out" ||
    fail "GYRE_ALGO=pairwise did not force the exchange"
  ! grep -qE "all_to_all of [0-9]+ B at n=3: oneshot" "$out" || fail "a forced exchange used the window"
  bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
  [ "$(grep -cE '^\[0\] +[0-9]+ ' "$out")" -eq 4 ] && [ "$bad" -eq 0 ] || fail "forced pairwise: wrong results"
  ! GYRE_ALGO=fastest GYRE_TIMEOUT=20 timeout 60 "$run" -n 2 "$bin/gyre-bench" all_to_all -b 24 -e 24 \
    -n 2 -w 1 >"$out" 2>&1 || fail "GYRE_ALGO=fastest was accepted"
  grep -q "algorithm 'fastest' (GYRE_ALGO or gyreConfig_t) is not one of ring, tree, rd, pairwise" "$out" ||
    fail "GYRE_ALGO=fastest failed without naming the algorithms"
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
  # Two ranks with a core each: rank 0 measures how far apart their CPUs sit over the window
  # and how fast the kernel copies, and both price their calls with its figures: they pick the
  # same algorithm.
  if [ "$(nproc)" -ge 2 ]; then
    GYRE_DEBUG=INFO timeout 60 "$run" -n 2 "$bin/gyre-bench" all_reduce -b 1M -e 1M -n 5 -w 1 >"$out" 2>&1 ||
      fail "gyre-bench all_reduce at n=2 exited $?"
    grep -qE '^\[0\] .*rank 0: a cache line between the CPUs of ranks 0 and 1 goes there and back in [1-9][0-9]* ns; the kernel copies 1 MiB in [1-9][0-9]* us' "$out" ||
      fail "rank 0 did not measure the round trip between the ranks' CPUs and the kernel's copy"
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
    for coll in all_gather broadcast gather scatter; do
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
    GYRE_ALGO=read kill_in_loop 3 2 --loop 100000000 --loop-coll gather --loop-count 300000
    expect_named 2 gather "0 1" 10000 "direct read gather"
    GYRE_ALGO=read kill_in_loop 3 0 --loop 100000000 --loop-coll scatter --loop-count 300000
    expect_named 0 scatter "1 2" 10000 "direct read scatter"
    echo "oneshot: direct read: each job ended within 10 s of the kill"
  fi
  ;;
tcp-congestion)
  # Tcp data connections between ranks of one host use BBR with its pacing off where the kernel
  # lets this user have BBR, else a window-based congestion control (cubic, else reno), whatever
  # the system default; GYRE_TCP_CONGESTION overrides it, and a name the kernel refuses is an
  # error at init that says what the host allows.
  GYRE_TRANSPORT=tcp GYRE_DEBUG=TRACE GYRE_TIMEOUT=60 timeout 120 "$run" -n 3 "$walk" >"$out" 2>&1 ||
    fail "walkthrough over tcp exited $?"
  if grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control &&
    { [ "$(id -u)" = 0 ] || grep -qw bbr /proc/sys/net/ipv4/tcp_allowed_congestion_control; }; then
    [ "$(grep -cE 'tcp to rank [0-9] channel 0 uses congestion control bbr, unpaced$' "$out")" -eq 6 ] ||
      fail "not every tcp connection uses BBR unpaced"
  else
    echo "tcp-congestion: BBR is not available to this user here; checking the fallback"
    [ "$(grep -cE 'tcp to rank [0-9] channel 0 uses congestion control (cubic|reno)$' "$out")" -eq 6 ] ||
      fail "not every tcp connection uses cubic or reno"
  fi
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
*) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS: $case_name"
