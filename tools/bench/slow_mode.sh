#!/usr/bin/env bash
# The slow mode, measured call by call: gyre and Open MPI over shared memory on one host, in
# alternated launches, every call timed on its own (gyre-bench --per-call; mpi_per_call.c the
# same for Open MPI). Each launch prints its mean, rank 0's percentiles, the calls over 1 ms
# and how often the calling threads slept, and how far apart CPUs 0 and 1 were just before
# (a cache line's round trip, line_pingpong.c); summaries per library follow, overall and
# split by that distance. Broadcasts run in place, as MPI_Bcast's one buffer does. -H contends
# the CPUs with that many busy loops, as other processes on a busy machine do; -R gives both
# libraries fresh data: before each call every rank stores to each line the call reads there
# (gyre-bench --rewrite), so no read finds the lines clean in its own cache as a loop over
# untouched buffers lets it (docs/tuning_shm.md).
#
# usage: tools/bench/slow_mode.sh [-n RANKS] [-p OPS] [-s SIZES] [-i ITERS] [-k ROUNDS]
#                                 [-H HOGS] [-R] [-e 'VAR=VALUE ...']...
#   -n RANKS   ranks                                               (default 2)
#   -p OPS     all_gather,all_reduce,broadcast                     (default all three)
#   -s SIZES   bytes as gyre-bench counts them (K, M suffixes)     (default 64K,1M)
#   -i ITERS   calls per launch                                    (default 3000)
#   -k ROUNDS  launches of each                                    (default 5)
#   -H HOGS    busy loops running meanwhile                        (default 0)
#   -R         fresh data before every call, the stores timed with it
#   -e ENV     one more gyre variant with these variables set, e.g. -e GYRE_SPIN_US=50
# Environment: GYRE_BUILD (default build). Open MPI from Debian (apt-get installs it).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${GYRE_BUILD:-$here/build}
ranks=2 ops=all_gather,all_reduce,broadcast sizes=64K,1M iters=3000 rounds=5 hogs=0
variants=("") fresh=0
while getopts "n:p:s:i:k:H:Re:h" opt; do
  case $opt in
    n) ranks=$OPTARG ;; p) ops=$OPTARG ;; s) sizes=$OPTARG ;; i) iters=$OPTARG ;;
    k) rounds=$OPTARG ;; H) hogs=$OPTARG ;; R) fresh=1 ;; e) variants+=("$OPTARG") ;;
    *) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
[ -x "$build/tools/gyre-bench" ] || { echo "build gyre first (cmake --build $build)"; exit 1; }
command -v mpicc >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
# Scratch: the probes' binaries and the rows the summary is made from (printed as they
# come, so nothing is lost when the folder goes).
out=$(mktemp -d /tmp/gyre-slow-mode.XXXXXX)
hog_pids=()
trap 'kill "${hog_pids[@]}" 2>/dev/null; rm -rf "$out"' EXIT
mpicc -O2 -o "$out/mpi_per_call" "$here/tools/bench/mpi_per_call.c" || exit 1
# Before each launch, how far apart CPUs 0 and 1 are now.
. "$here/tools/bench/placement.sh"
placement_build "$out" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_args=()
[ "$ranks" -gt "$(nproc)" ] && mpi_args+=(--oversubscribe)

bytes() {
  local v=${1%[KMkm]} u=${1: -1}
  case $u in K | k) echo $((v * 1024)) ;; M | m) echo $((v * 1048576)) ;; *) echo "$1" ;; esac
}
# summary line → "mean p50 p99 p99.9 max over1ms sleeps"
fields() { sed -E 's/.*mean ([0-9.]+).*p50 ([0-9.]+) p99 ([0-9.]+) p99.9 ([0-9.]+) max ([0-9.]+).*1 ms: ([0-9]+) of.*sleeps: ([0-9]+).*/\1 \2 \3 \4 \5 \6 \7/'; }

for ((h = 0; h < hogs; h++)); do (while :; do :; done) & hog_pids+=($!); done
gyre_fresh=() mpi_fresh=()
((fresh)) && gyre_fresh=(--rewrite) mpi_fresh=(rewrite)
echo "# slow mode $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, n = $ranks, $iters calls per launch, $hogs busy loops$( ((fresh)) && echo ', fresh data before every call')"
echo "# round op bytes lib: mean p50 p99 p99.9 max (us) calls>1ms sleeps, then the CPUs' cache-line round trip (ns)"
for ((r = 1; r <= rounds; r++)); do
  for op in ${ops//,/ }; do
    for size in ${sizes//,/ }; do
      b=$(bytes "$size")
      for v in "${variants[@]}"; do
        rt=$(round_trip)
        line=$(env $v "$build/tools/gyre-run" -n "$ranks" --no-prefix "$build/tools/gyre-bench" "$op" \
          -b "$b" -e "$b" -n "$iters" -w 20 -c 0 --per-call "${gyre_fresh[@]}" \
          $([ "$op" = broadcast ] && echo --inplace) 2>&1 |
          awk '$1 ~ /^[0-9]+$/ && NF >= 9 { mean = $6 } /per call/ { print "mean " mean " us; " $0 }')
        [ -n "$line" ] || { echo "gyre-bench failed ($op $b $v)"; exit 1; }
        echo "$r $op $b gyre${v:+[$v]}: $(fields <<<"$line") $rt"
      done
      rt=$(round_trip)
      line=$(mpirun "${mpi_args[@]}" -np "$ranks" "$out/mpi_per_call" "$op" "$b" "$iters" "${mpi_fresh[@]}" 2>&1 | grep 'per call')
      [ -n "$line" ] || { echo "mpi_per_call failed ($op $b)"; exit 1; }
      echo "$r $op $b openmpi: $(fields <<<"$line") $rt"
    done
  done
done | tee "$out/rows"
echo "# summary over $rounds launches: median (min-max) of the means, the most calls over 1 ms in one launch, sleeps in all"
awk '{ key = $2 " " $3 " " $4; m[key] = m[key] " " $5; if ($10 > o[key]) o[key] = $10; s[key] += $11; order[key] = NR }
  END { for (k in m) { n = split(substr(m[k], 2), v, " ")
          for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
          printf "%s median %.1f (%.1f-%.1f) us, over 1 ms at most %d, sleeps %d\n", k, v[int((n + 1) / 2)], v[1], v[n], o[k], s[k] } }' \
  "$out/rows" | sort
echo "# the same means by where the CPUs were: close (a round trip under 150 ns) or far"
awk '{ key = $2 " " $3 " " $4 " " ($12 < 150 ? "close" : "far"); m[key] = m[key] " " $5 }
  END { for (k in m) { n = split(substr(m[k], 2), v, " ")
          for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
          printf "%s: median %.1f (%.1f-%.1f) us over %d launches\n", k, v[int((n + 1) / 2)], v[1], v[n], n } }' \
  "$out/rows" | sort
