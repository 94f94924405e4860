#!/usr/bin/env bash
# The tuner's pick against every forced algorithm, per collective, n and size. One process per
# collective and n holds a communicator per algorithm and measures them in turn at each size
# (gyre-bench --algos), so all candidates meet the same machine state; a process reports
# medians of ROUNDS rounds. Where ranks outnumber cores, where the scheduler puts them changes
# from process to process and reorders close candidates, so -p runs PROCS processes and shows
# the median of their medians. Prints markdown tables with the pick, pick/best and tuned/best
# (each the median over the processes of that process's ratio to its own best forced time),
# then how many rows of each are within 10 % of the best. A forced algorithm that cannot run a
# call (a window post past its capacity) leaves it to the tuner: its cell shows - and is no
# candidate for the best.
#   tools/bench/tuner_check.sh [-r 2,4,8] [-b 8] [-e 16M] [-f 8] [-n ITERS] [-k ROUNDS]
#                              [-p PROCS] [-c COLLS] [-B auto|none]
# -B: gyre-run's --bind (auto, the default, binds ranks that outnumber the CPUs in blocks).
# GYRE_BENCH_ARGS: more gyre-bench flags for every process (--rewrite: fresh data every call).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${GYRE_BIN:-$here/../../build/tools}
ranks=2,4,8 minb=8 maxb=16M factor=8 iters=20 rounds=5 procs=1
colls=all_reduce,all_gather,broadcast,reduce bind=auto
while getopts "r:b:e:f:n:k:p:c:B:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; f) factor=$OPTARG ;;
    n) iters=$OPTARG ;; k) rounds=$OPTARG ;; p) procs=$OPTARG ;; c) colls=$OPTARG ;; B) bind=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 0 ;;
  esac
done
algos_of() {
  case $1 in
    all_reduce) echo "ring,tree,rd,oneshot,read" ;; all_gather) echo "ring,rd,oneshot,read" ;;
    broadcast) echo "ring,tree,oneshot,read" ;; reduce) echo "ring,tree,oneshot,read" ;;
    gather | scatter) echo "ring,tree,oneshot,read" ;;
    reduce_scatter) echo "ring,rd,oneshot,read" ;;
    all_to_all) echo "pairwise,rd,oneshot,read" ;;
    *) echo "ring" ;;
  esac
}
echo "# tuner check: gyre-bench --algos, time (us): per process the median of $rounds rounds of" \
  "$iters iterations, then the median over $procs process(es); $(date -u +%F), $(nproc) cores," \
  "transport ${GYRE_TRANSPORT:-auto}, gyre-run --bind $bind${GYRE_BENCH_ARGS:+, gyre-bench $GYRE_BENCH_ARGS}"
echo "# pick: the tuner's choice (its GYRE_DEBUG=INFO log, the measured choice's where it settled, the last one logged where a probe" \
  "during calls swapped its pricing); pick/best: that algorithm's time over" \
  "the best forced time; tuned/best: the tuned communicator, timed on its own, over the best"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/ratios"
for n in ${ranks//,/ }; do
  for coll in ${colls//,/ }; do
    algos=$(algos_of "$coll")
    # Forced tcp is a choice of the kernel's sockets: the tuner never reads other ranks' memory
    # there and has no host window (GYRE_ALGO=oneshot falls back to the tuner's own choice).
    if [ "${GYRE_TRANSPORT:-}" = tcp ]; then algos=${algos/,read/}; algos=${algos/,oneshot/}; fi
    printf "\n## %s, n=%s\n| bytes | %s | tuned | pick | pick/best | tuned/best |\n|---:|" \
      "$coll" "$n" "${algos//,/ | }"
    for _ in ${algos//,/ } tuned pick x y; do printf -- "---:|"; done
    echo
    : >"$work/rows"
    : >"$work/trips"
    : >"$work/moves"
    for ((p = 0; p < procs; p++)); do
      GYRE_DEBUG=INFO "$bin/gyre-run" -n "$n" --bind "$bind" --no-prefix "$bin/gyre-bench" "$coll" \
        --algos "$algos,tuned" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 3 \
        --rounds "$rounds" ${GYRE_BENCH_ARGS:-} 2>"$work/log" >"$work/out" || { cat "$work/log" "$work/out" >&2; exit 1; }
      grep -v '^#' "$work/out" >>"$work/rows"
      { grep -oE 'goes there and back in [0-9]+ ns' "$work/log" || true; } | awk '{print $6}' >>"$work/trips"
      { grep -cE 'rank 0: the CPUs of ranks 0 and 1 moved' "$work/log" || true; } >>"$work/moves"
    done
    # Rank 0's log names each pick: "rank 0: <coll> of <bytes> B at n=<n>: <algo> (predicted ...".
    awk -v coll="$coll" -v algos="$algos" '
      function median(list,   v, m, i, j, t) {
        m = split(list, v, " ")
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
          t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
        }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      }
      FILENAME ~ /log$/ {
        if (match($0, "rank 0: " coll " of [0-9]+ B at n=[0-9]+: [a-z]+ \\(predicted")) {
          split(substr($0, RSTART, RLENGTH), w, " "); pick[w[5]] = w[9]
        }
        # The measured choice (GYRE_TUNE=measure) logs what its trials settled on after that.
        if (match($0, "rank 0: " coll " of [0-9]+ B at n=[0-9]+: measured [a-z]+ ")) {
          split(substr($0, RSTART, RLENGTH), w, " "); pick[w[5]] = w[10]
        }
        # A forced algorithm that cannot run a call (a window post past its capacity) leaves
        # it to the tuner: that column timed the tuned algorithm again, not the one named.
        if (match($0, "rank 0: " coll " of [0-9]+ B at n=[0-9]+: .*GYRE_ALGO=[a-z]+ does not")) {
          split(substr($0, RSTART, RLENGTH), w, " "); f = $0
          sub(/.*GYRE_ALGO=/, "", f); sub(/ .*/, "", f); fellBack[w[5], f] = 1
        }
        next
      }
      {
        if ($NF != 0) { print "WRONG: " $0; bad = 1; exit 1 }
        if (!($1 in seen)) { seen[$1] = 1; order[++rows] = $1 }
        j = ++procs[$1]
        for (i = 2; i < NF - 1; i++) { t[$1, i] = t[$1, i] " " $i; v[$1, j, i] = $i }
      }
      END {
        if (bad) exit 1
        k = split(algos, name, ",")
        for (r = 1; r <= rows; r++) {
          b = order[r]; chosen = -1; line = "| " b " |"
          for (i = 2; i <= k + 2; i++) {
            if (i <= k + 1 && (b, name[i - 1]) in fellBack) { line = line " - |"; continue }
            line = line sprintf(" %.2f |", median(t[b, i]))
            if (i <= k + 1 && name[i - 1] == pick[b]) chosen = i
          }
          # The ratios of each process to its own best forced time, then their median: the
          # candidates of one process met the same machine state, those of others may not.
          pickRatios = tunedRatios = ""
          for (j = 1; j <= procs[b]; j++) {
            best = 1e300
            for (i = 2; i <= k + 1; i++) {
              if (!((b, name[i - 1]) in fellBack) && v[b, j, i] < best) best = v[b, j, i]
            }
            if (best == 1e300) continue  # no forced algorithm ran this call
            if (chosen > 0) pickRatios = pickRatios " " v[b, j, chosen] / best
            tunedRatios = tunedRatios " " v[b, j, k + 2] / best
          }
          p = (b in pick) ? pick[b] : "?"
          if (tunedRatios == "") { printf "%s %s | - | - |\n", line, p; continue }
          pr = chosen < 0 ? -1 : median(pickRatios); tr = median(tunedRatios)
          printf "%s %s | %s | %.2f |\n", line, p, pr < 0 ? "-" : sprintf("%.2f", pr), tr
          printf "%s %.4f\n", pr < 0 ? "-" : sprintf("%.4f", pr), tr >>ratios
        }
      }' ratios="$work/ratios" "$work/log" "$work/rows"
    # Each communicator's set-up probe (ranks with cores): the tuner prices with it, and the
    # tuned communicator swaps its pricing where a probe during calls finds the CPUs moved.
    sort -n "$work/trips" | awk '{ v[NR] = $1 } END { if (NR) printf "\nranks 0 and 1 at set-up: a cache line there and back in %s-%s ns (%d probes; 440 and up counts as far apart)\n", v[1], v[NR], NR }'
    awk '{ s += $1 } END { if (s) printf "the tuned communicator found the CPUs moved %d times during calls\n", s }' "$work/moves"
  done
done
# Rows within 10 % of the best forced time. tuned/best is the communicator that chose, timed
# like the others; pick/best reads the forced time of the last choice logged, which differs
# from what ran where a probe during calls swapped the pricing.
awk '{ rows++; if ($1 != "-" && $1 <= 1.10) pick++; if ($2 <= 1.10) tuned++ }
  END { printf "\nwithin 10 %% of the best forced algorithm: tuned %d of %d rows, pick %d of %d\n",
          tuned, rows, pick, rows }' "$work/ratios"
