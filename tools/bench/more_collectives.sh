#!/usr/bin/env bash
# The collectives the peer kit leaves out (reduce, reduce-scatter, all-to-all, gather, scatter):
# gyre (the tuner's picks) beside Open MPI, over shared memory (gyre's shm transport and window,
# Open MPI's default transport) or over tcp (gyre's tcp transport, Open MPI's ob1 with only its
# tcp and self transports, on loopback). ROUNDS alternated launches of each per collective and
# n, every size in each launch, each side first in every other round. Prints per collective and
# n the min/median/max of the launches' times, Open MPI's median over gyre's (above 1: gyre is
# faster) and every launch's #wrong, then each block's CPU round trips (tools/bench/placement.sh)
# before and after.
#   tools/bench/more_collectives.sh [-r 2,4,8] [-c COLLS] [-b 64] [-e 16M] [-f 8] [-k 3] [-t 0.2]
#                                   [-T shm|tcp]
# -t: seconds each size is timed for, on each side. Environment: GYRE_BUILD (default build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
bin=${GYRE_BUILD:-$root/build}/tools
ranks=2,4,8 colls=reduce,reduce_scatter,all_to_all,gather,scatter
minb=64 maxb=16M factor=8 rounds=3 seconds=0.2 transport=shm
while getopts "r:c:b:e:f:k:t:T:h" opt; do
  case $opt in
    r) ranks=$OPTARG ;; c) colls=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;;
    f) factor=$OPTARG ;; k) rounds=$OPTARG ;; t) seconds=$OPTARG ;; T) transport=$OPTARG ;;
    *) sed -n '2,12p' "$0"; exit 0 ;;
  esac
done
for coll in ${colls//,/ }; do
  case $coll in
    reduce | reduce_scatter | all_to_all | gather | scatter) ;;
    *) echo "more_collectives.sh: no '$coll' here: reduce, reduce_scatter, all_to_all, gather or" \
      "scatter (compare.sh times the others)" >&2 && exit 2 ;;
  esac
done
case $transport in
  shm) mpi_transport=() gyre_transport=auto
    what="gyre (shared memory, tuned) and Open MPI (default transport)" ;;
  tcp) gyre_transport=tcp mpi_transport=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    what="gyre (tcp, tuned) and Open MPI (ob1 over tcp,self on loopback)" ;;
  *) echo "more_collectives.sh: -T takes shm or tcp, not '$transport'" >&2 && exit 2 ;;
esac
command -v mpicc >/dev/null ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_more" "$here/mpi_more.c"
. "$here/placement.sh"
placement_build "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bytes_of() { numfmt --from=iec "$1"; }
sizes=$(awk -v b="$(bytes_of "$minb")" -v e="$(bytes_of "$maxb")" -v f="$factor" \
  'BEGIN { for (s = b; s <= e; s *= f) printf "%s%d", (s == b ? "" : ","), s }')
echo "# more collectives $(date -u '+%F %H:%M') UTC, $(nproc) cores: $what," \
  "$rounds alternated launches each, $seconds s per size; time (us)" \
  "min / median / max over the launches, the slowest rank's mean per call"
for n in ${ranks//,/ }; do
  mpi_args=(--allow-run-as-root -np "$n" "${mpi_transport[@]}")
  [ "$n" -gt "$(nproc)" ] && mpi_args+=(--oversubscribe)
  for coll in ${colls//,/ }; do
    : >"$work/rows"
    trips=""
    for ((k = 1; k <= rounds; k++)); do
      before=$(round_trip)
      for side in $([ $((k % 2)) = 1 ] && echo "gyre mpi" || echo "mpi gyre"); do
        if [ "$side" = gyre ]; then
          GYRE_TRANSPORT=$gyre_transport "$bin/gyre-run" -n "$n" --no-prefix "$bin/gyre-bench" "$coll" -b "$minb" -e "$maxb" \
            -f "$factor" --seconds "$seconds" -w 3 |
            awk '!/^#/ { print "gyre", $1, $6, $NF }' >>"$work/rows"
        else
          timeout 600 mpirun "${mpi_args[@]}" "$work/mpi_more" "$coll" "$sizes" "$seconds" |
            awk '!/^#/ { print "mpi", $1, $2, $3 }' >>"$work/rows"
        fi
      done
      trips="$trips $before/$(round_trip)"
    done
    printf "\n## %s, n=%s\n| bytes | gyre | Open MPI | Open MPI / gyre | #wrong |\n|---:|---:|---:|---:|---|\n" \
      "$coll" "$n"
    python3 - "$work/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, size, us, wrong = line.split()
    rows.setdefault(int(size), {}).setdefault(side, []).append((float(us), int(wrong)))
for size in sorted(rows):
    cell, med = [], {}
    for side in ("gyre", "mpi"):
        times = sorted(t for t, _ in rows[size].get(side, []))
        if not times:
            cell.append("-"); continue
        med[side] = statistics.median(times)
        cell.append(f"{times[0]:.2f} / {med[side]:.2f} / {times[-1]:.2f}")
    ratio = f"{med['mpi'] / med['gyre']:.2f}" if len(med) == 2 else "-"
    wrong = sum(w for s in rows[size].values() for _, w in s)
    print(f"| {size} | {cell[0]} | {cell[1]} | {ratio} | {wrong} |")
PY
    echo "round trips (ns) before/after each round:$trips"
  done
done
