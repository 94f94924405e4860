#!/usr/bin/env bash
# gyre, Open MPI and Gloo across the hosts of a namespace cluster (tests/cluster/cluster.sh),
# on the same shaped links in the same run: every host one network namespace with its own
# hostname and its own share of the CPUs; gyre through gyre-rendezvous and one gyre-run per
# host, Open MPI through mpirun whose rsh agent enters the namespaces, Gloo through a file
# store. Prints per collective, host count K, ranks per host L and size the median time
# (min-max over the repeats) and busbw of each library, and gyre's speed-up; with -a, also
# gyre with each named algorithm forced (GYRE_ALGO), in the same rounds.
#
# usage: tools/bench/cluster_compare.sh [-K HOSTS] [-L PER_HOST] [-s SIZES] [-p OPS]
#                                       [-k REPEATS] [-r RATE] [-d USEC] [-a ALGOS] [-o DIR]
#   -K HOSTS     host counts                                   (default 2,4)
#   -L PER_HOST  ranks per host                                (default 1,2)
#   -s SIZES     message sizes                                 (default 8,64K,1M,16M,64M)
#   -p OPS       allreduce,allgather,broadcast                 (default all three)
#   -k REPEATS   runs of each measurement, median kept          (default 3)
#   -r RATE      every host's outgoing link (tc tbf), or none   (default 1gbit)
#   -d USEC      and a one-way delay (netem, with RATE): the datacenter profiles are
#                -r 10gbit -d 25 and -r 1gbit -d 100           (default none)
#   -a ALGOS     gyre's variants: auto (the tuner) and/or ring, tree, rd, hier (default auto)
#   -o DIR       logs and rows.txt                              (default a fresh temporary folder)
# Environment: GYRE_BUILD (default build), PEERS_DIR (default ../shared/peers: mpi_bench.c and
# gloo_bench.cc, built here). Needs root; Open MPI and Gloo from Debian (apt-get installs them).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${GYRE_BUILD:-$here/build}
peers=${PEERS_DIR:-$here/../shared/peers}
hosts_list=2,4 local_list=1,2 sizes=8,64K,1M,16M,64M ops=allreduce,allgather,broadcast
repeats=3 rate=1gbit delay="" algos=auto out=""
while getopts "K:L:s:p:k:r:d:a:o:h" opt; do
  case $opt in
    K) hosts_list=$OPTARG ;; L) local_list=$OPTARG ;; s) sizes=$OPTARG ;; p) ops=$OPTARG ;;
    k) repeats=$OPTARG ;; r) rate=$OPTARG ;; d) delay=$OPTARG ;; a) algos=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/gyre-cluster-compare.XXXXXX)}
mkdir -p "$out"
name=gcb1
cluster() { "$here/tests/cluster/cluster.sh" "$name" "$@"; }
why=$(cluster check) || { echo "cluster_compare: $why"; exit 1; }
[ -x "$build/tools/gyre-bench" ] || { echo "build gyre first (cmake --build $build)"; exit 1; }
trap 'cluster down' EXIT

# The peers: Debian's Open MPI and Gloo, the kit's benchmarks, Gloo bound to GLOO_HOST.
pkgs=()
command -v mpicc >/dev/null || pkgs+=(openmpi-bin libopenmpi-dev)
[ -e /usr/include/gloo/config.h ] || pkgs+=(libgloo-dev)
if [ ${#pkgs[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
mpicc -O3 -march=native -o "$out/mpi_bench" "$peers/mpi_bench.c" -lm || exit 1
sed 's|attr.hostname = "127.0.0.1";|attr.hostname = getenv("GLOO_HOST") ? getenv("GLOO_HOST") : "127.0.0.1";|' \
  "$peers/gloo_bench.cc" >"$out/gloo_bench.cc"
grep -q GLOO_HOST "$out/gloo_bench.cc" || { echo "gloo_bench.cc: cannot bind it to GLOO_HOST"; exit 1; }
g++ -O3 -march=native -std=c++17 -o "$out/gloo_bench" "$out/gloo_bench.cc" -lgloo -pthread || exit 1
cat >"$out/agent.sh" <<EOF
#!/bin/sh
# mpirun's rsh agent: "agent HOST CMD..." runs CMD on that namespace host, as ssh would.
host=\$1; shift
exec "$here/tests/cluster/cluster.sh" "\${host%-h*}" exec "\${host##*-h}" sh -c "\$*"
EOF
chmod +x "$out/agent.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GYRE_SECRET=cluster-compare
# gyre's tuner is told the line rate, as an operator would (GYRE_NET_GBITS); Open MPI is told
# to yield while it polls (mpi_yield_when_idle), as the hosts share this machine's cores.
case $rate in
*gbit) export GYRE_NET_GBITS=${GYRE_NET_GBITS:-${rate%gbit}} ;;
*mbit) export GYRE_NET_GBITS=${GYRE_NET_GBITS:-$(awk -v m="${rate%mbit}" 'BEGIN { print m / 1000 }')} ;;
esac

bytes() {
  local v=${1%[KMGkmg]} u=${1: -1}
  case $u in K | k) echo $((v * 1024)) ;; M | m) echo $((v * 1048576)) ;; G | g) echo $((v * 1073741824)) ;; *) echo "$1" ;; esac
}
gyre_op() { case $1 in allreduce) echo all_reduce ;; allgather) echo all_gather ;; *) echo "$1" ;; esac; }
# Every library times a row over the same count: the peers' for 0.3 s at the row's pace, 3 to
# 1000 calls, fewer past 5 s, after 5 warm-up calls (gyre-bench --peer-iters with their bounds).
peer_bounds=(--target-s 0.3 --min-iters 3 --max-s 5)
gyre_bounds=(--seconds 0.3 --peer-iters --peer-min-iters 3 --peer-max-s 5 -w 5)

# Each bench prints nccl-tests rows: size count type redop root time algbw busbw #wrong ...
# row LIB K L OP < output: "LIB K L OP size time_us busbw wrong" per row.
rows() { awk -v lib="$1" -v k="$2" -v l="$3" -v op="$4" \
  '{ sub(/^\[[0-9]+\] */, "") } $1 ~ /^[0-9]+$/ && NF >= 9 { print lib, k, l, op, $1, $6, $8, $9 }'; }

run_gyre() {  # K L OP SIZE ALGO (auto: the tuner's choice)
  local k=$1 l=$2 op=$3 b=$4 algo=$5 addr pids=() rdv job=b$RANDOM lib=gyre forced=""
  [ "$algo" != auto ] && lib=gyre-$algo forced=$algo
  addr=$(cluster addr 0)
  "$here/tests/cluster/cluster.sh" "$name" exec 0 "$build/tools/gyre-rendezvous" --host "$addr" --port 29611 \
    >"$out/rdv.log" 2>&1 &
  rdv=$!
  sleep 0.2
  local flags=""
  [ "$op" = broadcast ] && flags=--inplace  # MPI_Bcast has one buffer
  for ((i = 0; i < k; i++)); do
    GYRE_ALGO=$forced cluster exec $i "$build/tools/gyre-run" -n "$l" --nnodes "$k" --node-rank $i \
      --rendezvous "$addr:29611" --job "$job" -- "$build/tools/gyre-bench" "$(gyre_op "$op")" \
      -b "$b" -e "$b" "${gyre_bounds[@]}" $flags >"$out/gyre.$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  kill "$rdv" 2>/dev/null
  wait "$rdv" 2>/dev/null
  grep '^\[0\]' "$out/gyre.0.log" | rows "$lib" "$k" "$l" "$op"
}

run_mpi() {  # K L OP SIZES
  local k=$1 l=$2 op=$3 s=$4 hostlist=""
  for ((i = 0; i < k; i++)); do hostlist+="${hostlist:+,}$name-h$i:$l"; done
  cluster exec 0 timeout 600 mpirun --allow-run-as-root -np $((k * l)) --host "$hostlist" \
    --mca plm_rsh_agent "$out/agent.sh" --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1 \
    "$out/mpi_bench" --sizes "$s" --ops "$op" "${peer_bounds[@]}" \
    2>"$out/mpi.err" | rows mpi "$k" "$l" "$op"
}

run_gloo() {  # K L OP SIZES
  local k=$1 l=$2 op=$3 s=$4 store pids=() prefix=p$RANDOM
  store=$(mktemp -d /tmp/gyre-gloo-store.XXXXXX)
  for ((i = 0; i < k; i++)); do
    for ((j = 0; j < l; j++)); do
      RANK=$((i * l + j)) SIZE=$((k * l)) STORE=$store PREFIX=$prefix GLOO_HOST=$(cluster addr $i) \
        cluster exec $i timeout 300 "$out/gloo_bench" --sizes "$s" --ops "$op" \
        "${peer_bounds[@]}" >"$store/rank$((i * l + j)).log" 2>&1 &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p"; done
  rows gloo "$k" "$l" "$op" <"$store/rank0.log"
  rm -rf "$store"
}

echo "# cluster compare $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, links $rate${delay:+, ${delay} µs one way}; logs in $out"
: >"$out/rows.txt"
for k in ${hosts_list//,/ }; do
  cluster up "$k" >/dev/null || exit 1
  for ((i = 0; i < k; i++)); do
    if [ -n "$delay" ]; then
      rate_args=()
      [ "$rate" != none ] && rate_args=(rate "$rate")
      cluster shape $i delay "$delay" "${rate_args[@]}" || exit 1
    elif [ "$rate" != none ]; then
      cluster shape $i rate "$rate"
    fi
  done
  for l in ${local_list//,/ }; do
    for op in ${ops//,/ }; do
      for rep in $(seq "$repeats"); do
        # The gloo store prefix and gyre job differ per run; the same sizes list for the peers.
        run_mpi "$k" "$l" "$op" "$sizes" >>"$out/rows.txt"
        run_gloo "$k" "$l" "$op" "$sizes" >>"$out/rows.txt"
        for s in ${sizes//,/ }; do
          for a in ${algos//,/ }; do run_gyre "$k" "$l" "$op" "$(bytes "$s")" "$a" >>"$out/rows.txt"; done
        done
      done
    done
  done
  cluster down
done

# Median time (min-max) and busbw per (K, L, op, size, lib); gyre's speed-up on each peer.
python3 - "$out/rows.txt" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
wrong = 0
for line in open(sys.argv[1]):
    lib, k, l, op, size, t, busbw, w = line.split()[:8]
    rows[(op, int(k), int(l), int(size), lib)].append((float(t), float(busbw)))
    wrong += int(float(w))
def fmt(us):
    return f"{us:.1f} µs" if us < 1000 else f"{us / 1000:.2f} ms"
keys = sorted({k[:4] for k in rows})
forced = sorted({k[4] for k in rows if k[4].startswith("gyre-")})
print("| op | K×L | size | gyre time (min-max) | gyre busbw | Open MPI | Gloo | gyre vs MPI | gyre vs Gloo |"
      + "".join(f" {f} (min-max) |" for f in forced))
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + " --- |" * len(forced))
for op, k, l, size in keys:
    cell, med = {}, {}
    for lib in ["gyre", "mpi", "gloo"] + forced:
        v = rows.get((op, k, l, size, lib))
        if not v:
            cell[lib] = "-"
            continue
        times = [t for t, _ in v]
        med[lib] = statistics.median(times)
        bw = statistics.median(b for _, b in v)
        cell[lib] = f"{fmt(med[lib])} ({fmt(min(times))}-{fmt(max(times))}), {bw:.3f} GB/s"
    ratio = lambda p: f"{med[p] / med['gyre']:.2f}×" if p in med and "gyre" in med else "-"
    g = rows.get((op, k, l, size, "gyre"))
    gbw = f"{statistics.median(b for _, b in g):.3f} GB/s" if g else "-"
    print(f"| {op} | {k}×{l} | {size} | {cell['gyre'].split(', ')[0]} | {gbw} | {cell['mpi']} | {cell['gloo']} | {ratio('mpi')} | {ratio('gloo')} |"
          + "".join(f" {cell[f]} |" for f in forced))
print(f"\nwrong elements over every run: {wrong}")
PY
