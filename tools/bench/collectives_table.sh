#!/usr/bin/env bash
# Every collective, tuned, per n: one gyre-bench run each; prints time (us) and busbw (GB/s)
# per size side by side, and fails if any row has a wrong element.
#   tools/bench/collectives_table.sh [-r 2,4,8] [-b 8] [-e 16M] [-f 64] [-n ITERS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GYRE_BIN:-$here/../../build/tools}
ranks=2,4,8 minb=8 maxb=16M factor=64 iters=20
while getopts "r:b:e:f:n:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; f) factor=$OPTARG ;;
    n) iters=$OPTARG ;; *) sed -n '2,4p' "$0"; exit 0 ;;
  esac
done
colls="all_reduce all_gather reduce_scatter broadcast reduce gather scatter all_to_all"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# every collective, tuned: time (us) / busbw (GB/s); $(date -u +%F), $(nproc) cores"
for n in ${ranks//,/ }; do
  for c in $colls; do
    "$bin/gyre-run" -n "$n" --no-prefix "$bin/gyre-bench" "$c" -b "$minb" -e "$maxb" -f "$factor" \
      -n "$iters" -w 3 | awk '!/^#/ { if ($NF != 0) { print "WRONG"; exit 1 } printf "%.1f / %.2f\n", $6, $8 }' > "$tmp/$c"
  done
  "$bin/gyre-run" -n "$n" --no-prefix "$bin/gyre-bench" all_reduce -b "$minb" -e "$maxb" -f "$factor" \
    -n 1 -w 0 -c 0 | awk '!/^#/ { print $1 }' > "$tmp/sizes"
  printf "\n## n=%s\n| bytes |" "$n"
  for c in $colls; do printf " %s |" "$c"; done
  printf "\n|---:|"; for c in $colls; do printf -- "---:|"; done; echo
  paste -d'|' "$tmp/sizes" $(for c in $colls; do echo "$tmp/$c"; done) | sed 's/|/ | /g; s/^/| /; s/$/ |/'
done
