#!/usr/bin/env bash
# The tuner's pick against every forced algorithm, per collective, n and size: runs gyre-bench
# once per algorithm (GYRE_ALGO) and once tuned, and prints the times side by side with the
# tuned time over the best forced one.
# Each time is the median of -k runs.
#   tools/bench/tuner_check.sh [-r 2,4,8] [-b 8] [-e 64M] [-f 8] [-n ITERS] [-k RUNS] [-c COLLS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GYRE_BIN:-$here/../../build/tools}
ranks=2,4,8 minb=8 maxb=64M factor=8 iters=10 repeats=3
colls=all_reduce,all_gather,broadcast,reduce
while getopts "r:b:e:f:n:k:c:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; f) factor=$OPTARG ;;
    n) iters=$OPTARG ;; k) repeats=$OPTARG ;; c) colls=$OPTARG ;;
    *) sed -n '2,6p' "$0"; exit 0 ;;
  esac
done
algos_of() {
  case $1 in
    all_reduce) echo "ring tree rd" ;; all_gather) echo "ring rd" ;;
    broadcast|reduce) echo "ring tree" ;; *) echo "ring" ;;
  esac
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bench() {  # n coll algo minbytes maxbytes iters
  GYRE_ALGO=$3 "$bin/gyre-run" -n "$1" --no-prefix "$bin/gyre-bench" "$2" -b "$4" -e "$5" \
    -f "$factor" -n "$6" -w 3 | awk '!/^#/ { if ($NF != 0) { print "WRONG"; exit 1 } print $1, $6 }'
}
once() {  # n coll algo -> "bytes time" lines; sizes up to 64 KiB get 20x the iterations
  local max last
  max=$(numfmt --from=iec "$maxb")
  last=$(numfmt --from=iec "$minb")
  while [ $(( last * factor )) -le 65536 ] && [ $(( last * factor )) -le "$max" ]; do
    last=$(( last * factor ))
  done
  bench "$1" "$2" "$3" "$minb" "$last" $(( iters * 20 ))
  if [ $(( last * factor )) -le "$max" ]; then bench "$1" "$2" "$3" $(( last * factor )) "$max" "$iters"; fi
}
run() {  # the median time per size over $repeats runs
  for _ in $(seq "$repeats"); do once "$@"; done | sort -k1,1n -k2,2g | awk -v k="$repeats" '
    { t[$1] = t[$1] " " $2; c[$1]++; if (!($1 in seen)) { seen[$1]; order[++m] = $1 } }
    END { for (i = 1; i <= m; i++) { split(t[order[i]], v, " "); print order[i], v[int((c[order[i]] + 1) / 2)] } }'
}
echo "# tuner check: gyre-bench time (us) per forced algorithm and tuned; $(date -u +%F), $(nproc) cores"
for n in ${ranks//,/ }; do
  for coll in ${colls//,/ }; do
    algos=$(algos_of "$coll")
    for a in $algos ""; do run "$n" "$coll" "$a" > "$tmp/${a:-tuned}"; done
    printf "\n## %s, n=%s\n| bytes |" "$coll" "$n"
    for a in $algos; do printf " %s |" "$a"; done
    printf " tuned | tuned/best |\n|---:|"
    for a in $algos tuned x; do printf -- "---:|"; done; echo
    paste -d' ' $(for a in $algos tuned; do echo "$tmp/$a"; done) | awk -v k="$(echo $algos | wc -w)" '{
      best = 1e30; line = "| " $1 " |"
      for (i = 0; i < k; i++) { t = $(2 + 2*i); line = line " " t " |"; if (t < best) best = t }
      tuned = $(2 + 2*k); printf "%s %s | %.2f |\n", line, tuned, tuned / best }'
  done
done
