#!/usr/bin/env bash
# A randomized loop of faults through gyre-run: each round picks the rank count, the fault
# (kill -9 at a random moment, a rank exiting early, a rank stopped, a mismatched
# collective) and the victim. A round passes when the job ends with an error before the
# outer limit; a hang is a round the outer `timeout` has to end.
# Usage: fault_loop.sh BIN_DIR [ROUNDS] [SEED]
set -u
bin=$1
rounds=${2:-100}
RANDOM=${3:-$$}
run=$bin/gyre-run
walk=$bin/walkthrough
out=$(mktemp)
trap 'rm -f "$out"' EXIT
hangs=0 slowest=0 slowest_what="" failed=0
kinds=(count dtype op root kind)
for i in $(seq "$rounds"); do
  n=$(( 2 + RANDOM % 3 ))
  victim=$(( RANDOM % n ))
  fault=$(( RANDOM % 4 ))
  start=$(date +%s%N)
  case $fault in
    0)
      what="n=$n kill -9 rank $victim"
      GYRE_TIMEOUT=3 timeout 60 "$run" -n $n --grace-ms 200 "$walk" --loop 5000 >"$out" 2>&1 &
      job=$!
      for _ in $(seq 400); do grep -q "rank $victim pid [0-9]* looping" "$out" && break; sleep 0.01; done
      sleep "0.$(( RANDOM % 10 ))"
      pid=$(sed -n "s/.*rank $victim pid \([0-9]*\) looping.*/\1/p" "$out")
      start=$(date +%s%N)
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
      wait $job
      rc=$? ;;
    1)
      what="n=$n rank $victim exits early"
      GYRE_TIMEOUT=3 timeout 60 "$run" -n $n --grace-ms 200 "$walk" --fail-rank $victim >"$out" 2>&1
      rc=$? ;;
    2)
      what="n=$n rank $victim stopped"
      GYRE_TIMEOUT=3 timeout 60 "$run" -n $n --grace-ms 200 "$walk" --loop 40 --stop-rank $victim \
        --stop-after $(( RANDOM % 10 )) >"$out" 2>&1
      rc=$? ;;
    3)
      kind=${kinds[$(( RANDOM % 5 ))]}
      what="n=$n mismatched $kind"
      GYRE_TIMEOUT=3 timeout 60 "$run" -n $n --grace-ms 200 "$walk" --mismatch "$kind" >"$out" 2>&1
      rc=$? ;;
  esac
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ "$rc" -eq 124 ]; then
    hangs=$((hangs + 1)); echo "HANG: round $i: $what"; cat "$out"
  elif [ "$rc" -eq 0 ]; then
    failed=$((failed + 1)); echo "NO ERROR: round $i: $what"; cat "$out"
  fi
  if [ "$ms" -gt "$slowest" ]; then slowest=$ms; slowest_what=$what; fi
done
echo "fault loop: $rounds faults, $hangs hangs, $failed without an error; slowest time to error: $slowest ms ($slowest_what)"
[ $hangs -eq 0 ] && [ $failed -eq 0 ]
