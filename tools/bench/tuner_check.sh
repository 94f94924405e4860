#!/usr/bin/env bash
# The tuner's pick against every forced algorithm, per collective, n and size. One process per
# collective and n holds a communicator per algorithm and measures them in turn at each size
# (gyre-bench --algos), so all candidates meet the same machine state; times are medians of
# --rounds rounds. Prints markdown tables with tuned/best.
#   tools/bench/tuner_check.sh [-r 2,4,8] [-b 8] [-e 16M] [-f 8] [-n ITERS] [-k ROUNDS] [-c COLLS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GYRE_BIN:-$here/../../build/tools}
ranks=2,4,8 minb=8 maxb=16M factor=8 iters=20 rounds=5
colls=all_reduce,all_gather,broadcast,reduce
while getopts "r:b:e:f:n:k:c:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; f) factor=$OPTARG ;;
    n) iters=$OPTARG ;; k) rounds=$OPTARG ;; c) colls=$OPTARG ;;
    *) sed -n '2,7p' "$0"; exit 0 ;;
  esac
done
algos_of() {
  case $1 in
    all_reduce) echo "ring,tree,rd" ;; all_gather) echo "ring,rd" ;;
    broadcast|reduce) echo "ring,tree" ;; *) echo "ring" ;;
  esac
}
echo "# tuner check: gyre-bench --algos, time (us), medians of $rounds rounds of $iters iterations;" \
  "$(date -u +%F), $(nproc) cores"
for n in ${ranks//,/ }; do
  for coll in ${colls//,/ }; do
    algos=$(algos_of "$coll")
    printf "\n## %s, n=%s\n| bytes | %s | tuned | tuned/best |\n|---:|" "$coll" "$n" "${algos//,/ | }"
    for _ in ${algos//,/ } tuned x; do printf -- "---:|"; done
    echo
    "$bin/gyre-run" -n "$n" --no-prefix "$bin/gyre-bench" "$coll" --algos "$algos,tuned" \
      -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 3 --rounds "$rounds" |
      awk '!/^#/ { if ($NF != 0) { print "WRONG"; exit 1 } line = "|"; for (i = 1; i < NF; i++) line = line " " $i " |"; print line }'
  done
done
