#!/usr/bin/env bash
# Run-to-run stability beside Open MPI: ROUNDS alternated launches of gyre-bench (shared
# memory, the tuner's picks) and of Open MPI's default transport (the peer kit's mpi_bench),
# each first in every other round, every size in each launch, at each rank count. Prints per
# size the min/median/max of the launches' times, the slowest launch over the median (the
# target: at most 1.3) and whether gyre's spread (max/min) is no wider than Open MPI's, then
# the same over the launches of each library where CPUs 0 and 1 stayed close or stayed far
# apart (a cache line's round trip before and after the launch: under 150 ns, over 250 ns),
# which on a virtual machine changes on its own every few tens of seconds, and over the
# launches during which the host stole at most one tick of CPU time from this machine
# (/proc/stat's steal: its other guests ran).
#
# usage: tools/bench/spread_check.sh [-r RANKS] [-s SIZES] [-p OP] [-k ROUNDS] [-o DIR] [-H]
#   -r RANKS   rank counts                                (default 2,4)
#   -s SIZES   sizes in one launch                        (default 64K,256K,1M,4M,16M,64M,256M)
#   -p OP      allreduce, allgather or broadcast          (default allreduce)
#   -k ROUNDS  launches of each                           (default 10)
#   -o DIR     rows.txt (one line per launch and size)    (default a fresh temporary folder)
#   -H         both libraries' large buffers on huge pages (glibc's malloc: the pool reserved in
#              /proc/sys/vm/nr_hugepages where there is one, else transparent huge pages)
# Environment: GYRE_BUILD (default build), PEERS_DIR (default ../shared/peers).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${GYRE_BUILD:-$here/build}
peers=${PEERS_DIR:-$here/../shared/peers}
ranks=2,4 sizes=64K,256K,1M,4M,16M,64M,256M op=allreduce rounds=10 out= huge=0
while getopts "r:s:p:k:o:Hh" opt; do
  case $opt in
    r) ranks=$OPTARG ;; s) sizes=$OPTARG ;; p) op=$OPTARG ;; k) rounds=$OPTARG ;; o) out=$OPTARG ;;
    H) huge=1 ;;
    *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/gyre-spread.XXXXXX)}
mkdir -p "$out"
[ -x "$build/tools/gyre-bench" ] || { echo "build gyre first (cmake --build $build)"; exit 1; }
[ -x "$peers/run.sh" ] || { echo "no peer kit at $peers"; exit 1; }
. "$here/tools/bench/placement.sh"
placement_build "$out" || { echo "cannot build the placement probe"; exit 1; }
((huge)) && huge_pages_on
bytes() {
  local v=${1%[KMGkmg]} u=${1: -1}
  case $u in K | k) echo $((v * 1024)) ;; M | m) echo $((v * 1048576)) ;; G | g) echo $((v * 1073741824)) ;; *) echo "$1" ;; esac
}
stolen() { awk '/^cpu / { print $9 }' /proc/stat; }  # ticks the host gave other guests
gyre_op=$op
case $op in allreduce) gyre_op=all_reduce ;; allgather) gyre_op=all_gather ;; esac
flags=()
[ "$op" = broadcast ] && flags=(--inplace)  # as MPI_Bcast's one buffer
list=$(for s in ${sizes//,/ }; do bytes "$s"; done | sort -n)
lo=$(head -1 <<<"$list") hi=$(tail -1 <<<"$list")
echo "# spread check $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $op, $rounds launches each${GLIBC_TUNABLES:+ ($GLIBC_TUNABLES)}; rows in $out/rows.txt"
: >"$out/rows.txt"
# One launch of Open MPI (the kit installs what it lacks on its first run) or of gyre, with its
# placement before and after and the ticks stolen meanwhile.
launch_mpi() {  # n k install
  local before after steal0
  before=$(round_trip) steal0=$(stolen)
  "$peers/run.sh" $3 -r "$1" -s "$sizes" -p "$op" -l mpi_default -t 0.3 -o "$out/mpi_$1_$2" \
    >"$out/mpi_$1_$2.log" 2>&1 || { echo "Open MPI run failed: $out/mpi_$1_$2.log"; exit 1; }
  after=$(round_trip) mpi_steal=$(($(stolen) - steal0))
  awk -v n="$1" -v k="$2" -v p="$(placement_of "$before" "$after")" -v s="$mpi_steal" \
    '/^ *[0-9]/ {print "mpi", n, k, $1, $6, p, s}' "$out/mpi_$1_$2"/*_n"$1".txt >>"$out/rows.txt"
  mpi_place="$before/$after"
}
launch_gyre() {  # n k (install, unused)
  local before after steal0 place b
  before=$(round_trip) steal0=$(stolen)
  # Each size as its own row, over as many calls as Open MPI's (its -t, within the kit's
  # 20-1000): both sides then feel the ticks the host steals (10 ms) over the same calls.
  for b in $list; do
    "$build/tools/gyre-run" -n "$1" --no-prefix "$build/tools/gyre-bench" "$gyre_op" "${flags[@]}" \
      -b "$b" -e "$b" --seconds 0.3 --peer-iters -w 5 >"$out/gyre_$1_$2_$b.txt" 2>&1 ||
      { echo "gyre-bench failed: $out/gyre_$1_$2_$b.txt"; exit 1; }
  done
  after=$(round_trip) gyre_steal=$(($(stolen) - steal0))
  place=$(placement_of "$before" "$after")
  for b in $list; do
    awk -v n="$1" -v k="$2" -v p="$place" -v s="$gyre_steal" '$1 ~ /^[0-9]+$/ && NF >= 9 {
      if ($NF != 0) { print "WRONG RESULTS: " $0 > "/dev/stderr"; exit 1 }
      print "gyre", n, k, $1, $6, p, s }' "$out/gyre_$1_$2_$b.txt" >>"$out/rows.txt" || exit 1
  done
  gyre_place="$before/$after ($place)"
}
for n in ${ranks//,/ }; do
  for ((k = 1; k <= rounds; k++)); do
    install=-n
    [ "$k" = 1 ] && [ "$n" = "${ranks%%,*}" ] && install=""
    # Each goes first in every other launch: the one that follows the other's launch would
    # otherwise always meet the placement it left behind.
    order=(mpi gyre)
    ((k % 2)) || order=(gyre mpi)
    for who in "${order[@]}"; do "launch_$who" "$n" "$k" "$install"; done
    first=${order[0]/mpi/Open MPI}
    echo "# n=$n launch $k ($first first): CPUs 0 and 1 $mpi_place ns before/after Open MPI, $gyre_place ns before/after gyre; stolen ticks: Open MPI $mpi_steal, gyre $gyre_steal"
  done
done
# "lib n size": sorted times, then per size: gyre and mpi min/median/max, max/median, spreads.
summary() {  # $1: a filter on the placement column ("" for all, "calm": at most 1 stolen tick)
  awk -v want="$1" '
    function stats(list, a,   k, i, j, t) {
      k = split(list, a, " ")
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k
    }
    want == "calm" && $7 > 1 { next }
    want != "" && want != "calm" && $6 != want { next }
    { key = $2 " " $4; t[$1 " " key] = t[$1 " " key] " " $5; keys[key] = 1 }
    END {
      for (key in keys) {
        split(key, kv, " ")
        g = stats(t["gyre " key], ga); m = stats(t["mpi " key], ma)
        if (g == 0 || m == 0) continue
        gmed = ga[int((g + 1) / 2)]; mmed = ma[int((m + 1) / 2)]
        printf "| %s | %s | %d | %.1f / %.1f / %.1f | %.2f | %.1f / %.1f / %.1f | %.2f | %s | %s |\n",
          kv[1], kv[2], g, ga[1], gmed, ga[g], ga[g] / gmed, ma[1], mmed, ma[m], ma[m] / mmed,
          (ga[g] / gmed <= 1.3 ? "yes" : "no"), (ga[g] / ga[1] <= ma[m] / ma[1] ? "yes" : "no")
      }
    }' "$out/rows.txt" | sort -t'|' -k2,2n -k3,3n
}
for p in "" close far calm; do
  echo
  what="every launch"
  [ -n "$p" ] && what="the launches with the CPUs $p"
  [ "$p" = calm ] && what="the launches during which the host stole at most 1 tick"
  echo "### $op, $what: time (us) min / median / max"
  echo
  echo "| n | bytes | gyre launches | gyre | slowest/median | Open MPI | slowest/median | gyre within 1.3 | spread no wider |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---|---|"
  summary "$p"
done
