#!/usr/bin/env bash
# Ranks as processes, the way users run them. Usage: process_tests.sh BIN_DIR CASE
set -u
bin=$1
case_name=$2
run=$bin/gyre-run
walk=$bin/walkthrough
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "--- output ---"; cat "$out"; exit 1; }

case $case_name in
walkthrough)
  # gyre-run with its embedded rendezvous; every rank checks its results.
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 "$walk" >"$out" 2>&1 || fail "walkthrough exited $?"
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
  rows=$(grep -cE '^\[0\] +[0-9]+ ' "$out")
  [ "$rows" -ge 16 ] || fail "expected 16 result rows, got $rows"
  bad=$(grep -E '^\[0\] +[0-9]+ ' "$out" | awk '$NF != 0' | wc -l)
  [ "$bad" -eq 0 ] || fail "$bad rows with #wrong != 0"
  ;;
failing-rank)
  # Rank 1 exits 3 mid-job: the others fail naming it, gyre-run reports it and exits 3.
  start=$(date +%s)
  GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$walk" --fail-rank 1 --exit-code 3 >"$out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  [ "$rc" -eq 3 ] || fail "gyre-run exited $rc, expected 3"
  grep -q 'gyre-run: rank 1 failed (exit code 3)' "$out" || fail "gyre-run did not name rank 1"
  # Every surviving rank names the operation and the lost rank (the first detector's cause).
  for r in 0 2 3; do
    grep -qE "^\[$r\] walkthrough: .*all_reduce #1 .*(send to|receive from) rank 1 failed over tcp" "$out" ||
      fail "rank $r did not report an error naming the operation and rank 1"
  done
  [ "$elapsed" -lt 30 ] || fail "took ${elapsed}s: errors must come well inside the 60 s timeout"
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
torch-env)
  # torch-style variables: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT.
  for attempt in 1 2 3; do
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
  ;;
multi-node)
  # A standalone gyre-rendezvous and two "machines" (two gyre-run) of 2 ranks each.
  "$bin/gyre-rendezvous" --host 127.0.0.1 --port 0 >"$out.server" 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q 'listening on' "$out.server" && break; sleep 0.05; done
  address=$(sed -n 's/^gyre-rendezvous listening on //p' "$out.server")
  [ -n "$address" ] || { kill $server; fail "gyre-rendezvous did not print its address"; }
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
*) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS: $case_name"
