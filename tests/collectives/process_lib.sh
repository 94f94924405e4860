# Shared by process_tests.sh and process_faults.sh (sourced): the case's arguments, its output
# file and the helpers both use. Usage of either: SCRIPT BIN_DIR CASE
bin=$1
case_name=$2
run=$bin/gyre-run
walk=$bin/walkthrough
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
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
