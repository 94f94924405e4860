#!/usr/bin/env bash
# Runs gyre-bench (over each chosen transport) and the peer benchmarks (Gloo TCP, Open MPI
# TCP, Open MPI's default: shared memory on one host, from ../shared/peers) in one session on
# this machine. Prints, per collective and rank count, the median busbw and time of each
# over repeated runs with the fastest and slowest run beside it, and gyre's ratios (gyre tcp
# against the tcp peers, gyre shm against Open MPI shm), and draws PNG plots with gnuplot:
# busbw vs size, and time vs size up to 64 KiB, one line per library. Broadcasts run in
# place, as MPI_Bcast's one buffer does. Each gyre row takes as many calls as the peers' rows
# (gyre-bench --peer-iters: enough for 0.5 s at the row's pace, but 20 to 1000) after as many
# warm-up calls (5). gyre and the peers take turns block by block (one
# rank count and collective), each block noting how far apart CPUs 0 and 1 were (a cache
# line's round trip) before and after each side, and counting the blocks where both met the
# same placement.
# With tcp it also runs gyre-tcp-ceiling (raw loopback sockets moving the bytes a
# bandwidth-optimal ring must, nothing else) and prints gyre tcp's share of it; its sockets
# use the congestion control gyre's do (GYRE_TCP_CONGESTION, auto: BBR unpaced on one host
# where the kernel lets this user have it, else cubic).
#
# usage: tools/bench/compare.sh [-r RANKS] [-s SIZES] [-p OPS] [-k REPEATS] [-t TRANSPORTS]
#                               [-l PEERS] [-o DIR] [-R] [-H]
#   -r RANKS       rank counts                          (default 2,4)
#   -s SIZES       message sizes                        (default 8,64K,1M,16M,256M)
#   -p OPS         allreduce,allgather,broadcast        (default allreduce)
#   -k REPEATS     runs of each measurement, median kept (default 3)
#   -t TRANSPORTS  gyre transports: shm,tcp              (default both)
#   -l PEERS       gloo,mpi_tcp,mpi_default             (default all three)
#   -o DIR         logs, rows.txt, tables.md and plots/  (default a fresh temporary folder)
#   -R             measure nothing: the tables and plots again from DIR's logs (with -o, -k)
#   -H             every library's large buffers on huge pages (glibc's malloc: the pool
#                  reserved in /proc/sys/vm/nr_hugepages where there is one, else transparent)
# Environment: GYRE_BUILD (default build), PEERS_DIR (default ../shared/peers),
#              GYRE_BENCH_ARGS (extra gyre-bench flags).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${GYRE_BUILD:-$here/build}
peers=${PEERS_DIR:-$here/../shared/peers}
ranks=2,4 sizes=8,64K,1M,16M,256M ops=allreduce repeats=3 transports=shm,tcp
peerlist=gloo,mpi_tcp,mpi_default out="" render_only=0 huge=0
while getopts "r:s:p:k:t:l:o:RHh" opt; do
  case $opt in
    r) ranks=$OPTARG ;; s) sizes=$OPTARG ;; p) ops=$OPTARG ;; k) repeats=$OPTARG ;;
    t) transports=$OPTARG ;; l) peerlist=$OPTARG ;; o) out=$OPTARG ;; R) render_only=1 ;;
    H) huge=1 ;;
    *) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
if ((render_only)); then
  [ -n "$out" ] && [ -f "$out/placement.txt" ] || { echo "-R needs -o DIR of a finished run"; exit 2; }
fi
# The logs are appended to: a folder that holds another run's would mix the two runs' rows.
if ((!render_only)) && [ -n "$out" ] && compgen -G "$out/gyre_*.txt" >/dev/null; then
  echo "$out holds the logs of an earlier run: give a new or empty folder (-R redraws one)"
  exit 2
fi
out=${out:-$(mktemp -d /tmp/gyre-compare.XXXXXX)}
mkdir -p "$out"
[ -x "$build/tools/gyre-bench" ] || { echo "build gyre first (cmake --build $build)"; exit 1; }
[ -x "$peers/run.sh" ] || { echo "no peer kit at $peers"; exit 1; }
if ! command -v gnuplot >/dev/null; then
  echo "# installing gnuplot-nox for the plots"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 ||
    echo "# warning: no gnuplot (apt-get install gnuplot-nox); tables only"
fi

bytes() {  # 64K -> 65536
  local v=${1%[KMGkmg]} u=${1: -1}
  case $u in K|k) echo $((v * 1024)) ;; M|m) echo $((v * 1048576)) ;; G|g) echo $((v * 1073741824)) ;; *) echo "$1" ;; esac
}
gyre_op() { case $1 in allreduce) echo all_reduce ;; allgather) echo all_gather ;; *) echo "$1" ;; esac; }
# MPI_Bcast has one buffer; an out-of-place broadcast would add a local copy at the root.
gyre_flags() { case $1 in broadcast) echo --inplace ;; esac; }

# Where CPUs 0 and 1 are, each round: copies through shared memory slow down several times
# while a virtual machine's CPUs sit far apart (docs/perf/placement.md).
. "$here/tools/bench/placement.sh"
placement_build "$out"
((huge)) && huge_pages_on
header="gyre vs peers, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r)${GLIBC_TUNABLES:+, $GLIBC_TUNABLES}"
((render_only)) && header="gyre vs peers, $(date -u -r "$out/placement.txt" '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r)"
echo "# $header; logs in $out"
# One block: one rank count and collective, every size, each library in turn.
run_peers() {  # round n op
  "$peers/run.sh" $install -r "$2" -s "$sizes" -p "$3" -l "$peerlist" -t 0.5 \
    -o "$out/peers_$1_$3_n$2" >"$out/peers_$1_$3_n$2.log" 2>&1 ||
    echo "# warning: peer run $1 ($3, n=$2) failed (see $out/peers_$1_$3_n$2.log)"
}
run_gyre() {  # round n op
  local t s b ceiling_cc ceiling_unpaced= n=$2 op=$3
  for t in ${transports//,/ }; do
    case ${GYRE_TCP_CONGESTION:-auto} in
      auto)
        ceiling_cc=cubic
        if grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control &&
          { [ "$(id -u)" = 0 ] || grep -qw bbr /proc/sys/net/ipv4/tcp_allowed_congestion_control; }; then
          ceiling_cc=bbr ceiling_unpaced=--unpaced
        fi
        ;;
      system) ceiling_cc= ;;
      *) ceiling_cc=$GYRE_TCP_CONGESTION ;;
    esac
    for s in ${sizes//,/ }; do
      b=$(bytes "$s")
      # As many calls as the peers' rows (their -t, within their 20-1000).
      GYRE_TRANSPORT=$t "$build/tools/gyre-run" -n "$n" --no-prefix "$build/tools/gyre-bench" \
        "$(gyre_op "$op")" $(gyre_flags "$op") -b "$b" -e "$b" --seconds 0.5 --peer-iters -w 5 \
        ${GYRE_BENCH_ARGS:-} \
        >>"$out/gyre_${t}_${op}_n${n}_$1.txt" 2>&1
      if [ "$t" = tcp ]; then
        "$build/tools/gyre-tcp-ceiling" -n "$n" -c "$(gyre_op "$op")" -b "$b" -e "$b" \
          ${ceiling_cc:+--congestion "$ceiling_cc"} $ceiling_unpaced \
          >>"$out/ceiling_${op}_n${n}_$1.txt" 2>&1
      fi
    done
  done
}
# The two sides take turns block by block (a rank count and a collective), not round by
# round, so each meets the placement the other measured in, a minute apart rather than many:
# here the host moves the CPUs every few tens of seconds to minutes (docs/perf/run_to_run.md).
rounds=$repeats
((render_only)) && rounds=0 || : >"$out/placement.txt"
block=0
for k in $(seq "$rounds"); do
  for n in ${ranks//,/ }; do
    for op in ${ops//,/ }; do
      # The first block lets the kit apt-get what it lacks (Open MPI, Gloo); later ones need not look.
      install=-n
      [ "$block" = 0 ] && install=""
      # The peers go first in odd blocks, gyre in even ones: whichever follows always meets the
      # placement the other left behind.
      order=(peers gyre)
      ((block % 2)) && order=(gyre peers)
      line="round $k, $op n=$n:"
      for who in "${order[@]}"; do
        before=$(round_trip)
        "run_$who" "$k" "$n" "$op"
        line="$line ${who/peers/the peers} $before-$(round_trip) ns;"
      done
      echo "${line%;}" >>"$out/placement.txt"
      block=$((block + 1))
    done
  done
done
# Each block's placement on either side, from its line: "... gyre B-A ns; the peers B-A ns".
trips() { sed -E "s/.*$1 ([0-9?]+)-([0-9?]+) ns.*/\1 \2/" <<<"$2"; }  # side, line -> B A
block=0 same=0
declare -A met  # "gyre's placement / the peers'" -> blocks
while IFS= read -r line; do
  place_gyre=$(placement_of $(trips gyre "$line"))
  place_peers=$(placement_of $(trips "the peers" "$line"))
  met["$place_gyre / $place_peers"]=$((${met["$place_gyre / $place_peers"]:-0} + 1))
  [ "$place_gyre" = "$place_peers" ] && [ "$place_gyre" != moved ] && same=$((same + 1))
  block=$((block + 1))
done <"$out/placement.txt"

# Rows: "lib op n size busbw time" from every run.
{
  for f in "$out"/gyre_*_n*_*.txt; do
    base=$(basename "$f" .txt); rest=${base#gyre_}; t=${rest%%_*}; rest=${rest#*_}
    op=${rest%%_n*}; n=${rest##*_n}; n=${n%_*}
    awk -v lib="gyre_$t" -v op="$op" -v n="$n" '/^ *[0-9]/ {print lib, op, n, $1, $8, $6}' "$f"
  done
  for f in "$out"/ceiling_*_n*_*.txt; do
    [ -f "$f" ] || continue
    base=$(basename "$f" .txt); rest=${base#ceiling_}; op=${rest%%_n*}; n=${rest##*_n}; n=${n%_*}
    awk -v op="$op" -v n="$n" '/^ *[0-9]/ {print "tcp_ceiling", op, n, $1, $4, $3}' "$f"
  done
  for f in "$out"/peers_*/*_n*.txt; do
    [ -f "$f" ] || continue
    lib=$(basename "$f" .txt); n=${lib##*_n}; lib=${lib%_n*}
    [ "$lib" = mpi_default ] && lib=mpi_shm
    awk -v lib="$lib" -v n="$n" '/^# op / {op=$3} /^ *[0-9]/ && op != "" {print lib, op, n, $1, $8, $6}' "$f"
  done
} >"$out/rows.txt"

# Medians and spreads: "lib op n size busbw time busbw_min busbw_max time_min time_max".
awk '
  { key = $1 " " $2 " " $3 " " $4; bw[key] = bw[key] " " $5; tm[key] = tm[key] " " $6 }
  function sorted(list, a,   k, i, j, t) {
    k = split(list, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k
  }
  function spread(list,   a, k) { k = sorted(list, a); return a[int((k + 1) / 2)] " " a[1] " " a[k] }
  END {
    for (key in bw) {
      split(spread(bw[key]), b, " "); split(spread(tm[key]), t, " ")
      print key, b[1], t[1], b[2], b[3], t[2], t[3]
    }
  }' "$out/rows.txt" |
  sort -k1,1 -k2,2 -k3,3n -k4,4n >"$out/medians.txt"

# Tables: every library's busbw (time in µs below 64 KiB, where busbw rounds to 0) with its
# spread over the runs, and the ratios of the medians gyre/peer; above 64 KiB busbw ratios, below it peer time / gyre time. tcp/ceiling is
# the share of what raw loopback sockets reached in the same session.
awk -v header="$header" -v runs="$repeats" '
  { key = $2 " " $3; if (!(key in cases)) { cases[key] = 1; corder[++nc] = key }; sizes[key " " $4] = 1; bw[$1 " " key " " $4] = $5; tm[$1 " " key " " $4] = $6; libs[$1] = 1 }
  { bwlo[$1 " " key " " $4] = $7; bwhi[$1 " " key " " $4] = $8; tmlo[$1 " " key " " $4] = $9; tmhi[$1 " " key " " $4] = $10 }
  # The median, then the spread over the runs: (fastest-slowest).
  function cell(l, k, s,   x) {
    x = l " " k " " s
    if (!(x in bw)) return "-"
    if (s < 65536) return sprintf("%.1f us (%.1f-%.1f)", tm[x], tmlo[x], tmhi[x])
    return sprintf("%.2f (%.2f-%.2f)", bw[x], bwhi[x], bwlo[x])
  }
  function ratio(g, p, k, s,   a, b) {
    if (!((g " " k " " s) in bw) || !((p " " k " " s) in bw)) return "-"
    if (s < 65536) { a = tm[p " " k " " s]; b = tm[g " " k " " s]; return b > 0 ? sprintf("%.2fx", a / b) : "-" }
    a = bw[g " " k " " s]; b = bw[p " " k " " s]; return b > 0 ? sprintf("%.2fx", a / b) : "-"
  }
  END {
    print "# " header
    n = split("gyre_shm gyre_tcp mpi_shm mpi_tcp gloo_tcp tcp_ceiling", order, " ")
    for (c = 1; c <= nc; c++) {
      key = corder[c]; split(key, kk, " ")
      printf "\n## %s, n=%s: median busbw GB/s (time below 64 KiB), (fastest-slowest) of %d runs\n\n| size |", kk[1], kk[2], runs
      for (i = 1; i <= n; i++) if (order[i] in libs) printf " %s |", order[i]
      printf " shm/mpi_shm | tcp/mpi_tcp | tcp/gloo | tcp/ceiling |\n|---:|"
      for (i = 1; i <= n; i++) if (order[i] in libs) printf "---:|"
      print "---:|---:|---:|---:|"
      m = 0; delete sorted
      for (sk in sizes) { split(sk, q, " "); if (q[1] " " q[2] == key) sorted[++m] = q[3] + 0 }
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
      for (i = 1; i <= m; i++) {
        s = sorted[i]; printf "| %d |", s
        for (l = 1; l <= n; l++) if (order[l] in libs) printf " %s |", cell(order[l], key, s)
        printf " %s | %s | %s | %s |\n", ratio("gyre_shm", "mpi_shm", key, s), ratio("gyre_tcp", "mpi_tcp", key, s), ratio("gyre_tcp", "gloo_tcp", key, s), ratio("gyre_tcp", "tcp_ceiling", key, s)
      }
    }
  }' "$out/medians.txt" | tee "$out/tables.md"
if [ -s "$out/placement.txt" ]; then
  { echo; echo "CPUs 0 and 1, a cache line's round trip before-after each side (close: both under 150 ns; far apart: both over 250):"
    sed 's/^/- /' "$out/placement.txt"
    printf "\nBlocks where gyre and the peers met the same placement: %d of %d (gyre / peers:" \
      "$same" "$block"
    for c in "${!met[@]}"; do printf " %s %d," "$c" "${met[$c]}"; done
    echo ")"
  } | tee -a "$out/tables.md"
fi

# Plots: one busbw plot and one small-message time plot per collective and rank count.
if command -v gnuplot >/dev/null; then
  mkdir -p "$out/plots"
  for key in $(awk '{print $2 "_" $3}' "$out/medians.txt" | sort -u); do
    op=${key%_*}; n=${key#*_}
    libs=$(awk -v op="$op" -v n="$n" '$2 == op && $3 == n {print $1}' "$out/medians.txt" | sort -u)
    for lib in $libs; do
      awk -v op="$op" -v n="$n" -v lib="$lib" '$1 == lib && $2 == op && $3 == n {print $4, $5, $6}' \
        "$out/medians.txt" >"$out/plots/$key.$lib.dat"
    done
    bwplot="" tplot=""
    for lib in $libs; do
      bwplot="$bwplot${bwplot:+, }'$out/plots/$key.$lib.dat' using 1:2 with linespoints title '$lib'"
      tplot="$tplot${tplot:+, }'$out/plots/$key.$lib.dat' using (\$1 <= 65536 ? \$1 : 1/0):3 with linespoints title '$lib'"
    done
    gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced
set logscale x 2
set format x "%.0b%BB"
set key left top
set grid
set xlabel "message size"
set output "$out/plots/${op}_n${n}_busbw.png"
set title "$op, $n ranks: busbw (GB/s) — $header"
set ylabel "busbw (GB/s)"
plot $bwplot
set output "$out/plots/${op}_n${n}_time.png"
set title "$op, $n ranks: time (µs), small messages"
set ylabel "time (µs)"
set logscale y 10
set xrange [*:65536]
plot $tplot
GP
  done
  echo "# plots: $(ls "$out"/plots/*.png | tr '\n' ' ')"
fi
