#!/usr/bin/env bash
# A cluster of K "hosts" on this machine: each a network namespace with its own address on a
# bridge, and its own hostname (a UTS namespace per command), so gyre sees K host ids and
# talks tcp between them, shared memory inside each.
#
#   cluster.sh NAME up K         namespaces NAME-h0..h{K-1}, 10.199.N.{1..K}/24 (N from NAME)
#   cluster.sh NAME down         ends every process on its hosts, removes everything NAME made
#                                (idempotent)
#   cluster.sh NAME exec I CMD…  runs CMD on host I (hostname NAME-hI; /etc/hosts names every
#                                host NAME-hJ; its own share of the CPUs)
#   cluster.sh NAME addr I       host I's address
#   cluster.sh NAME shape I rate RATE | loss PERCENT | clear
#                         | delay USEC [reorder PERCENT] [rate RATE]
#                                host I's outgoing link: a token bucket (tbf) at RATE
#                                (e.g. 10gbit), random loss of PERCENT of its tcp packets
#                                (nftables), or netem: USEC one way, PERCENT of the packets
#                                overtaking the delayed ones, at most RATE (a datacenter
#                                profile: delay 25 rate 10gbit); exit 77 where the kernel has
#                                no netem
#   cluster.sh NAME link I down|up
#                                cuts (or restores) host I's cable at the bridge
#   cluster.sh NAME check        exit 0 if namespaces can be made here, else 77 and why
#
# NAME is short ([a-z]+[0-9]+, at most 6 characters; the number, 1..250, picks the subnet):
# interface names are at most 15 bytes. Needs root, iproute2, util-linux (unshare); loss needs
# nft.
set -uo pipefail

name=${1:?usage: cluster.sh NAME up K|down|exec I CMD...|addr I|shape ...|link I down|up|check}
cmd=${2:?missing command}
shift 2
if ! [[ $name =~ ^[a-z]+([0-9]+)$ ]] || [ ${#name} -gt 6 ] || [ "${BASH_REMATCH[1]}" -lt 1 ] ||
  [ "${BASH_REMATCH[1]}" -gt 250 ]; then
  echo "cluster.sh: NAME '$name' must be letters then a number 1..250, 6 characters at most" >&2
  exit 2
fi
subnet=10.199.${BASH_REMATCH[1]}
bridge=${name}br
state=/run/gyre-cluster/$name
ns() { echo "${name}-h$1"; }
hosts() { ip netns list 2>/dev/null | sed -n "s/^${name}-h\([0-9]*\).*/\1/p" | sort -n; }
die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

check() {
  [ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)"; return 77; }
  for tool in ip unshare; do
    command -v $tool >/dev/null || { echo "needs $tool"; return 77; }
  done
  local probe=${name}-probe
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cannot create network namespaces here (ip netns add failed)"
    return 77
  fi
  local ok=0
  ip link add "${name}pa" type veth peer name "${name}pb" 2>/dev/null || ok=1
  ip link del "${name}pa" 2>/dev/null
  ip netns exec "$probe" unshare --uts true 2>/dev/null || ok=2
  ip netns del "$probe"
  case $ok in
  1) echo "cannot create veth pairs here"; return 77 ;;
  2) echo "cannot create UTS namespaces here (unshare --uts)"; return 77 ;;
  esac
  return 0
}

down() {
  # Every process still on a host goes first (SIGTERM, then SIGKILL after 2 s): nothing a
  # failed test started outlives the cluster.
  local pids
  pids=$(for i in $(hosts); do ip netns pids "$(ns "$i")" 2>/dev/null; done)
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null
    for _ in $(seq 20); do
      kill -0 $pids 2>/dev/null || break
      sleep 0.1
    done
    kill -9 $pids 2>/dev/null
  fi
  for i in $(hosts); do ip netns del "$(ns "$i")" 2>/dev/null; done
  # A namespace some process still holds lives on; its cables go now.
  for link in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${name}b[0-9]*\)@.*/\1/p"); do
    ip link del "$link" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
  rm -rf "$state"
  nft delete table bridge "$name" 2>/dev/null
  return 0
}

up() {
  local k=${1:?up needs K}
  [ "$k" -ge 1 ] && [ "$k" -le 16 ] || die "K must be 1..16"
  down
  mkdir -p "$state"
  cp /etc/hosts "$state/hosts"
  for ((i = 0; i < k; i++)); do echo "$subnet.$((i + 1)) $(ns $i)" >>"$state/hosts"; done
  ip link add "$bridge" type bridge || die "cannot create bridge $bridge"
  ip link set "$bridge" up
  for ((i = 0; i < k; i++)); do
    local n
    n=$(ns $i)
    ip netns add "$n" || die "cannot create namespace $n"
    ip link add "${name}v$i" type veth peer name "${name}b$i" || die "cannot create veth"
    ip link set "${name}v$i" netns "$n"
    ip link set "${name}b$i" master "$bridge" up
    ip -n "$n" link set "${name}v$i" name eth0
    ip -n "$n" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
  done
  # The bridge forwards as soon as its ports are up (no STP learning delay).
  ip link set "$bridge" type bridge forward_delay 0 stp_state 0 2>/dev/null
  for ((i = 0; i < k; i++)); do
    for _ in $(seq 50); do
      ip -n "$(ns $i)" -br link show eth0 | grep -q ' UP ' && break
      sleep 0.1
    done
  done
}

host_exec() {
  local i=${1:?exec needs a host index}
  shift
  [ -e "/run/netns/$(ns "$i")" ] || die "no host $i in cluster $name"
  # A fresh UTS namespace per command: every process of host i sees hostname NAME-hI. Only
  # the network namespace is entered (not ip netns exec, which remounts /sys and hides the
  # cgroup tree daemons such as slurmd need).
  # Its /etc/hosts names every host of the cluster, as a real cluster's resolver does.
  # And its own share of the machine's CPUs, as a real host has cores of its own (with more
  # hosts than CPUs, hosts share them round-robin).
  local k cpus first last
  k=$(hosts | wc -l)
  cpus=$(nproc)
  if [ "$cpus" -ge "$k" ]; then
    first=$((i * cpus / k))
    last=$(((i + 1) * cpus / k - 1))
  else
    first=$((i % cpus))
    last=$first
  fi
  exec nsenter --net="/run/netns/$(ns "$i")" taskset -c "$first-$last" unshare --uts --mount sh -c \
    'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"' "$(ns "$i")" \
    "$state/hosts" "$@"
}

shape() {
  local i=${1:?shape needs a host index} what=${2:?shape needs rate|loss|delay|clear}
  local n
  n=$(ns "$i")
  case $what in
  rate)
    # burst: 2 ms at line rate (at least 64 KiB, or a fast sender stalls on the bucket): a
    # larger one lets short runs through at the bridge's speed instead of the line's.
    local bits
    bits=$(awk -v r="${3:?rate}" 'BEGIN {
      v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
      m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit") ? 1 : 0
      printf "%d", v * m }')
    [ "$bits" -gt 0 ] || die "rate '$3' is not a number with kbit, mbit or gbit"
    local burst=$((bits / 8 / 500))
    [ $burst -ge 65536 ] || burst=65536
    ip netns exec "$n" tc qdisc replace dev eth0 root tbf rate "$3" burst "$burst" latency 50ms ||
      die "tc tbf failed"
    ;;
  delay)
    # delay USEC [reorder PERCENT] [rate RATE]: netem holds every packet USEC (but the
    # overtaking share) and serialises them at RATE, so latency and line rate shape one link.
    local usec=${3:?usec} extra=()
    shift 3
    while [ $# -gt 0 ]; do
      case $1 in
      reorder) extra+=(reorder "${2:?reorder needs a percentage}%" 50%) ;;
      rate) extra+=(rate "${2:?rate needs a rate}") ;;
      *) die "shape delay: unknown '$1' (reorder PERCENT, rate RATE)" ;;
      esac
      shift 2
    done
    # limit: packets netem may hold, above a 10 Gbit/s link's bytes in flight over 1 ms.
    ip netns exec "$n" tc qdisc replace dev eth0 root netem limit 20000 delay "${usec}us" \
      "${extra[@]}" 2>/dev/null ||
      { echo "cluster.sh: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM)" >&2; exit 77; }
    ;;
  loss)
    command -v nft >/dev/null || { echo "cluster.sh: loss needs nft (nftables)" >&2; exit 77; }
    local per_million
    per_million=$(awk -v p="${3:?percent}" 'BEGIN { printf "%d", p * 10000 }')
    nft add table bridge "$name" &&
      nft "add chain bridge $name forward { type filter hook forward priority 0; }" &&
      nft add rule bridge "$name" forward iifname "${name}b$i" meta l4proto tcp \
        numgen random mod 1000000 "<" "$per_million" drop || die "nft loss rule failed"
    ;;
  clear)
    ip netns exec "$n" tc qdisc del dev eth0 root 2>/dev/null
    nft delete table bridge "$name" 2>/dev/null
    ;;
  *) die "shape: unknown '$what'" ;;
  esac
}

case $cmd in
check) check ;;
up) up "$@" ;;
down) down ;;
exec) host_exec "$@" ;;
addr) echo "$subnet.$((${1:?addr needs a host index} + 1))" ;;
shape) shape "$@" ;;
link) ip link set "${name}b${1:?link needs a host index}" "${2:?down or up}" ;;
*) die "unknown command '$cmd'" ;;
esac
