#!/usr/bin/env bash
# Runs gyre-bench and the peer benchmarks (Gloo TCP, Open MPI TCP, Open MPI shared memory,
# from ../shared/peers) in one session on this machine, and prints, per collective, rank
# count and size, the median busbw of each over repeated runs and gyre's ratio to each peer.
#
# usage: tools/bench/compare.sh [-r RANKS] [-s SIZES] [-p OPS] [-k REPEATS] [-l PEERS] [-o DIR]
#   -r RANKS    rank counts                          (default 2,4)
#   -s SIZES    message sizes                        (default 8,64K,1M,16M,256M)
#   -p OPS      allreduce,allgather,broadcast        (default allreduce)
#   -k REPEATS  runs of each measurement, median kept (default 3)
#   -l PEERS    gloo,mpi_tcp,mpi_default             (default all three)
#   -o DIR      keep raw logs here                   (default a fresh temporary folder)
# Environment: GYRE_BUILD (default build), PEERS_DIR (default ../shared/peers),
#              GYRE_BENCH_ARGS (extra gyre-bench flags).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${GYRE_BUILD:-$here/build}
peers=${PEERS_DIR:-$here/../shared/peers}
ranks=2,4 sizes=8,64K,1M,16M,256M ops=allreduce repeats=3 peerlist=gloo,mpi_tcp,mpi_default out=""
while getopts "r:s:p:k:l:o:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; s) sizes=$OPTARG ;; p) ops=$OPTARG ;; k) repeats=$OPTARG ;;
    l) peerlist=$OPTARG ;; o) out=$OPTARG ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/gyre-compare.XXXXXX)}
mkdir -p "$out"
[ -x "$build/tools/gyre-bench" ] || { echo "build gyre first (cmake --build $build)"; exit 1; }
[ -x "$peers/run.sh" ] || { echo "no peer kit at $peers"; exit 1; }

bytes() {  # 64K -> 65536
  local v=${1%[KMGkmg]} u=${1: -1}
  case $u in K|k) echo $((v * 1024)) ;; M|m) echo $((v * 1048576)) ;; G|g) echo $((v * 1073741824)) ;; *) echo "$1" ;; esac
}
gyre_op() { case $1 in allreduce) echo all_reduce ;; allgather) echo all_gather ;; *) echo "$1" ;; esac; }

echo "# gyre vs peers, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r); logs in $out"
for k in $(seq "$repeats"); do
  "$peers/run.sh" -n -r "$ranks" -s "$sizes" -p "$ops" -l "$peerlist" -t 0.5 -o "$out/peers_$k" >/dev/null 2>&1 ||
    echo "# warning: peer run $k failed (see $out/peers_$k)"
  for n in ${ranks//,/ }; do
    for op in ${ops//,/ }; do
      for s in ${sizes//,/ }; do
        b=$(bytes "$s")
        iters=$(( b > 0 ? 200000000 / b : 1000 )); iters=$(( iters < 5 ? 5 : (iters > 2000 ? 2000 : iters) ))
        "$build/tools/gyre-run" -n "$n" --no-prefix "$build/tools/gyre-bench" "$(gyre_op "$op")" \
          -b "$b" -e "$b" -n "$iters" -w 3 ${GYRE_BENCH_ARGS:-} >>"$out/gyre_${op}_n${n}_$k.txt" 2>&1
      done
    done
  done
done

# Rows: "lib op n size busbw time" from every run, then medians.
{
  for f in "$out"/gyre_*_n*_*.txt; do
    base=$(basename "$f" .txt); op=${base#gyre_}; op=${op%%_n*}; n=${base##*_n}; n=${n%_*}
    awk -v op="$op" -v n="$n" '/^ *[0-9]/ {print "gyre", op, n, $1, $8, $6}' "$f"
  done
  for f in "$out"/peers_*/*_n*.txt; do
    [ -f "$f" ] || continue
    lib=$(basename "$f" .txt); n=${lib##*_n}; lib=${lib%_n*}
    awk -v lib="$lib" -v n="$n" '/^# op / {op=$3} /^ *[0-9]/ && op != "" {print lib, op, n, $1, $8, $6}' "$f"
  done
} >"$out/rows.txt"

awk -v peers="$peerlist" '
  { key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; vals[key] = vals[key] " " $5; times[key] = times[key] " " $6
    ops[$2] = 1; ns[$3] = 1; sizes[$4] = 1 }
  function median(list,   a, k, i, j, t) {
    k = split(list, a, " "); if (k == 0) return "";
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((k + 1) / 2)]
  }
  END {
    np = split("gloo_tcp mpi_tcp mpi_default", libs, " ")
    for (op in ops) for (n in ns) {
      printf "\n## %s, n=%s: median busbw GB/s (time us for gyre)\n\n", op, n
      printf "| size | gyre | gyre time | gloo_tcp | mpi_tcp | mpi_shm | gyre/gloo | gyre/mpi_tcp | gyre/mpi_shm |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
      m = 0; for (s in sizes) sorted[++m] = s + 0
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (sorted[j] < sorted[i]) { t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t }
      for (i = 1; i <= m; i++) {
        s = sorted[i]; g = median(vals["gyre" SUBSEP op SUBSEP n SUBSEP s]); gt = median(times["gyre" SUBSEP op SUBSEP n SUBSEP s])
        if (g == "") continue
        line = sprintf("| %d | %.3f | %.1f", s, g, gt)
        ratios = ""
        for (l = 1; l <= np; l++) {
          p = median(vals[libs[l] SUBSEP op SUBSEP n SUBSEP s])
          line = line sprintf(" | %s", p == "" ? "-" : sprintf("%.3f", p))
          # At tiny sizes busbw rounds to 0: compare times instead (peer time / gyre time).
          pt = median(times[libs[l] SUBSEP op SUBSEP n SUBSEP s])
          if (p == "" || pt == "") ratios = ratios " | -"
          else if (p + 0 > 0.01 && g + 0 > 0.01) ratios = ratios sprintf(" | %.2fx", g / p)
          else ratios = ratios sprintf(" | %.2fx (time)", pt / gt)
        }
        print line ratios " |"
      }
      delete sorted
    }
  }' "$out/rows.txt"
