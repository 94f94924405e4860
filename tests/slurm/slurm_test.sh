#!/usr/bin/env bash
# gyre under a real Slurm: starts its own munged, slurmctld and slurmd (Debian's slurm-wlm),
# runs jobs through srun with no gyre-specific setup, and tears everything down. Usage:
#   slurm_test.sh BIN_DIR [nodes]   (nodes: K slurmd, each a host of a namespace cluster)
# Exit 77, saying why, where root, the daemons or namespaces are missing.
set -u
bin=$1
mode=${2:-one}
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to start slurmd"; exit 77; }
for tool in munged slurmctld slurmd srun; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed (slurm-wlm, munge)"; exit 77; }
done
dir=$(mktemp -d /tmp/gyre-slurm.XXXXXX)
chmod 755 "$dir"
cluster() { "$here/../cluster/cluster.sh" gs7 "$@"; }
daemons=()
cleanup() {
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  wait 2>/dev/null
  [ "$mode" = nodes ] && cluster down
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do echo "--- $(basename "$f") ---"; tail -n 30 "$f"; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }

# A munged of our own, on its own socket and key: the system's is not touched.
mkdir -m 711 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/key" bs=128 count=1 status=none
chmod 600 "$dir/munge/key"
munged -f -S "$dir/munge/sock" --key-file="$dir/munge/key" --log-file="$dir/munge.log" \
  --pid-file="$dir/munge/pid" --seed-file="$dir/munge/seed" || fail "munged did not start"
daemons+=("$(cat "$dir/munge/pid")")

mkdir -p "$dir/state" "$dir/spool"
ctld_host=$(hostname)
nodes=("$(hostname)")
node_lines="NodeName=$(hostname) CPUs=8 State=UNKNOWN"
if [ "$mode" = nodes ]; then
  why=$(cluster check) || { echo "SKIP: $why"; exit 77; }
  cluster up 2 || fail "cluster up"
  ctld_host="gs7-h0($(cluster addr 0))"
  nodes=(gs7-h0 gs7-h1)
  node_lines="NodeName=gs7-h0 NodeAddr=$(cluster addr 0) CPUs=8 State=UNKNOWN
NodeName=gs7-h1 NodeAddr=$(cluster addr 1) CPUs=8 State=UNKNOWN"
fi
cat >"$dir/slurm.conf" <<CONF
ClusterName=gyre
SlurmctldHost=$ctld_host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Eight task slots per node whatever the machine has: the tests run more ranks than cores.
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node_lines
PartitionName=gyre Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
on() {  # on NODE_INDEX CMD...: on that node (a cluster host in nodes mode)
  local i=$1
  shift
  if [ "$mode" = nodes ]; then cluster exec "$i" "$@"; else "$@"; fi
}
# start LOG NODE CMD...: CMD on that node in the background; the subshell execs into it, so
# the pid kept in $daemons is the daemon's own.
start() {
  local log=$1 i=$2
  shift 2
  if [ "$mode" = nodes ]; then
    (exec "$here/../cluster/cluster.sh" gs7 exec "$i" "$@" >"$log" 2>&1) &
  else
    (exec "$@" >"$log" 2>&1) &
  fi
  daemons+=($!)
}
start "$dir/slurmctld.log" 0 slurmctld -D -f "$SLURM_CONF"
for i in "${!nodes[@]}"; do
  mkdir -p "$dir/spool/${nodes[$i]}"
  start "$dir/slurmd-$i.log" "$i" slurmd -D -f "$SLURM_CONF" -N "${nodes[$i]}"
done
for _ in $(seq 50); do
  [ "$(on 0 timeout 3 sinfo -h -t idle -o '%D' 2>/dev/null)" = "${#nodes[@]}" ] && break
  sleep 0.2
done
[ "$(on 0 timeout 3 sinfo -h -t idle -o '%D' 2>/dev/null)" = "${#nodes[@]}" ] || fail "the nodes never became idle"

export GYRE_TIMEOUT=60
if [ "$mode" = nodes ]; then
  # 2 nodes × 2 tasks: shared memory on a node, tcp between them.
  GYRE_DEBUG=INFO on 0 timeout 120 srun -N 2 -n 4 --ntasks-per-node 2 -l "$bin/walkthrough" \
    >"$dir/walk.log" 2>&1 || fail "srun walkthrough exited $?"
  grep -q '^0: walkthrough: 4 ranks, all correct' "$dir/walk.log" || fail "no success line"
  seen=$(grep -c 'peers over shm 1, rdma 0, tcp 2,' "$dir/walk.log")
  [ "$seen" -eq 4 ] || fail "$seen of 4 ranks report shared memory inside a node and tcp across"
else
  timeout 120 srun -n 4 -l "$bin/walkthrough" >"$dir/walk.log" 2>&1 || fail "srun walkthrough exited $?"
  grep -q '^0: walkthrough: 4 ranks, all correct' "$dir/walk.log" || fail "no success line"
  # Two steps of one allocation, each its own gyre job (job id and port from the step).
  timeout 120 salloc -n 3 sh -c "srun -n 3 -l '$bin/walkthrough' && srun -n 2 -l '$bin/walkthrough'" \
    >"$dir/steps.log" 2>&1 || fail "two steps in one allocation failed"
  grep -q '^0: walkthrough: 3 ranks, all correct' "$dir/steps.log" || fail "step 0 did not succeed"
  grep -q '^0: walkthrough: 2 ranks, all correct' "$dir/steps.log" || fail "step 1 did not succeed"
  timeout 120 srun -n 3 -l "$bin/gyre-bench" all_reduce -b 8 -e 1M -f 32 -n 3 -w 1 \
    >"$dir/bench.log" 2>&1 || fail "srun gyre-bench exited $?"
  grep -q '# Avg bus bandwidth' "$dir/bench.log" || fail "gyre-bench printed no summary"
fi
cat "$dir"/*.log | grep -E '^0: (walkthrough|#)' | head -5
echo "PASS: slurm $mode"
