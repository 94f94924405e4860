#!/usr/bin/env bash
# What one tiny call costs in instructions and stores, per rank: two ranks run CALLS calls of
# the collective under callgrind, and the C API call's inclusive counts are divided by CALLS.
# Counted, not timed, so two builds compare exactly; a rank that waits adds its polls, so the
# rank that waits less shows the call's own path. Far apart a tiny call's stores set its pace
# (docs/perf/small_calls.md).
#   tools/bench/call_cost.sh [COLLECTIVE=gather] [BYTES=64] [CALLS=20000]
# Environment: GYRE_BUILD (default build); LD_LIBRARY_PATH=DIR runs another libgyre.so.0.
set -euo pipefail
coll=${1:-gather} bytes=${2:-64} calls=${3:-20000}
build=${GYRE_BUILD:-build}
case "$coll" in
  all_reduce) api=gyreAllReduce ;;
  all_gather) api=gyreAllGather ;;
  reduce_scatter) api=gyreReduceScatter ;;
  broadcast) api=gyreBroadcast ;;
  reduce) api=gyreReduce ;;
  gather) api=gyreGather ;;
  scatter) api=gyreScatter ;;
  all_to_all) api=gyreAllToAll ;;
  *) echo "call_cost.sh: no C API call for '$coll'" >&2 && exit 2 ;;
esac
if ! command -v valgrind >/dev/null; then
  echo "# installing valgrind"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
GYRE_SECRET=${GYRE_SECRET:-call-cost} timeout 600 "$build/tools/gyre-run" -n 2 --no-prefix \
  valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out/rank.%p" \
  "$build/tools/gyre-bench" "$coll" -b "$bytes" -e "$bytes" -n "$calls" -w 10 >"$out/bench.log" 2>&1 ||
  { cat "$out/bench.log" >&2; exit 1; }
echo "# $coll of $bytes B at n = 2, $calls calls: per call of $api, each rank"
for f in "$out"/rank.[0-9]*; do
  callgrind_annotate --inclusive=yes --show=Ir,Dw "$f" >"$f.txt"
  grep -m1 "???:$api " "$f.txt" |
    awk -v n="$calls" '{gsub(",", "", $1); gsub(",", "", $3);
                        printf "instructions %.0f  stores %.0f\n", $1 / n, $3 / n}'
done
