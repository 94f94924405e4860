# Sourced by the bench scripts. How far apart CPUs 0 and 1 are now: a cache line's round trip
# between them (line_pingpong.c), which on a virtual machine changes as the host moves its CPUs
# and slows every copy through shared memory with it (docs/perf/placement.md).
#   placement_build DIR   builds the probe into DIR
#   round_trip            prints the round trip in ns, or ? where the probe cannot run
#   placement_of B A      close, far or moved from round trips before and after a run
#   huge_pages_on         every library's large buffers on huge pages from here on (below)
placement_build() {
  cc -O2 -pthread -o "$1/line_pingpong" "$(dirname "${BASH_SOURCE[0]}")/line_pingpong.c" 2>/dev/null &&
    placement_probe=$1/line_pingpong
}
round_trip() {
  if [ -x "${placement_probe:-}" ] && [ "$(nproc)" -ge 2 ]; then
    "$placement_probe" 0 1 0.5 | awk '{ v = $3 } END { print v }'
  else
    echo "?"
  fi
}
placement_of() {  # close: both under 150 ns; far: both over 250; else moved (or unknown)
  if [ "$1" != "?" ] && [ "$2" != "?" ] && [ "$1" -lt 150 ] && [ "$2" -lt 150 ]; then echo close
  elif [ "$1" != "?" ] && [ "$2" != "?" ] && [ "$1" -gt 250 ] && [ "$2" -gt 250 ]; then echo far
  else echo moved; fi
}
# glibc's malloc (2.35 and later) puts its large chunks on huge pages under a tunable, in every
# process that inherits it, gyre's ranks and the peers' alike: from the reserved pool
# (hugetlb=2, MAP_HUGETLB: every page huge) where the operator reserved one
# (/proc/sys/vm/nr_hugepages), else advised MADV_HUGEPAGE (hugetlb=1: transparent huge pages,
# only on the 2 MiB-aligned stretches of each chunk). Docs: tuning_shm.md, "Buffers on huge pages".
huge_pages_on() {
  local thp=/sys/kernel/mm/transparent_hugepage/enabled mode=1
  if [ "$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)" -gt 0 ] 2>/dev/null; then
    mode=2
  elif [ -r "$thp" ] && grep -q '\[never\]' "$thp"; then
    echo "# warning: no huge page pool and transparent huge pages off ($thp): buffers stay on small pages"
  fi
  export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=$mode
}
