#!/usr/bin/env bash
# Ranks as processes that fail, leave, disagree or meet strangers: every failure a clear error
# naming the rank, within its bound. Usage: process_faults.sh BIN_DIR CASE
set -u
source "$(dirname "$0")/process_lib.sh"

case $case_name in
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
  # Ranks that both end before gyre-run looks are told apart by the cause a failing rank
  # reports (GYRE_RUN_CAUSE_FD), not by their order: here rank 0 names rank 1 and exits at
  # once, and rank 1 exits 0.3 s after it, past the 0.2 s gyre-run waits for a rank killed by
  # a signal, within the 1 s it waits for a cause named.
  timeout 60 "$run" -n 2 --grace-ms 2000 bash -c 'if [ "$GYRE_RANK" = 0 ]; then
    echo "0 1" >&"$GYRE_RUN_CAUSE_FD"; exit 2; fi; sleep 0.3; exit 3' >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 3 ] || fail "rank 0 named rank 1 as its cause: gyre-run exited $rc, expected 3"
  grep -q 'gyre-run: rank 1 failed (exit code 3)' "$out" || fail "gyre-run did not name rank 1, the cause"
  # With several channels the call opens its channels' connections first (hosts with cores to
  # spare): to a peer already gone they fail as fast, naming it and the call.
  GYRE_CHANNELS=4 GYRE_TIMEOUT=60 timeout 120 "$run" -n 4 --grace-ms 5000 "$walk" --fail-rank 1 \
    --exit-code 3 >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 3 ] || fail "with 4 channels: gyre-run exited $rc, expected 3"
  # (a channel whose set-up rank 1's exit cut short says so, naming it).
  ranks_printed "0 2 3" "walkthrough: [a-z ]+: rank 1 is gone .*all_reduce #1 .*(rank 1 failed over ${GYRE_TRANSPORT:-shm}|setting up [a-z ]+ with rank 1 \(channel [0-9]+\): the peer)" \
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
kill9)
  # kill -9 one rank in the middle of large all-reduces (n = 4) over the links (the ring: where
  # ranks share cores the tuner reads 4 MiB directly, and process_tests.sh's oneshot case kills
  # ranks during direct reads): every other rank fails naming it, well inside the 60 s
  # timeout, and gyre-run reports the signal.
  GYRE_ALGO=ring kill_in_loop 4 2 --loop 2000
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
