#!/usr/bin/env bash
# Two builds of gyre side by side: alternates their gyre-bench runs (A, B, A, B, ...) so both
# see the same machine, and prints min/median/max time per size and B's median over A's.
# usage: tools/bench/ab_compare.sh BUILD_A BUILD_B ROUNDS RANKS COLLECTIVE MIN MAX FACTOR [VAR=VALUE...]
#   e.g. tools/bench/ab_compare.sh ../old/build build 5 2 all_reduce 64K 2M 2 GYRE_TRANSPORT=tcp
# ITERS (default 100) and WARMUP (5) set gyre-bench's -n and -w: tiny calls want ITERS=100000.
set -euo pipefail
[ $# -ge 8 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
a=$1 b=$2 rounds=$3 n=$4 coll=$5 lo=$6 hi=$7 factor=$8
shift 8
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for r in $(seq "$rounds"); do
  for which in A B; do
    dir=$a
    [ "$which" = B ] && dir=$b
    env "$@" "$dir/tools/gyre-run" -n "$n" --no-prefix "$dir/tools/gyre-bench" "$coll" -b "$lo" \
      -e "$hi" -f "$factor" -n "${ITERS:-100}" -w "${WARMUP:-5}" | awk -v w="$which" '$1 ~ /^[0-9]+$/ {print w, $1, $6, $9}' >>"$rows"
  done
done
awk '$4 != 0 {print "WRONG RESULTS:", $0; bad = 1} END {exit bad}' "$rows"
sort -k2,2n -k1,1 -k3,3g "$rows" | awk '
  function flush() {
    if (size == "") return
    ma = a[int((na + 1) / 2)]; mb = b[int((nb + 1) / 2)]
    printf "%10s %10.2f %10.2f %10.2f   %10.2f %10.2f %10.2f   %5.2f\n", size, a[1], ma, a[na], b[1], mb, b[nb], mb / ma
  }
  BEGIN { printf "%10s %32s   %32s   %5s\n", "bytes", "A min/median/max (us)", "B min/median/max (us)", "B/A" }
  $2 != size { flush(); size = $2; na = nb = 0 }
  $1 == "A" { a[++na] = $3 } $1 == "B" { b[++nb] = $3 }
  END { flush() }'
