# Sourced by the bench scripts. How far apart CPUs 0 and 1 are now: a cache line's round trip
# between them (line_pingpong.c), which on a virtual machine changes as the host moves its CPUs
# and slows every copy through shared memory with it (docs/perf/placement.md).
#   placement_build DIR   builds the probe into DIR
#   round_trip            prints the round trip in ns, or ? where the probe cannot run
#   placement_of B A      close, far or moved from round trips before and after a run
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
