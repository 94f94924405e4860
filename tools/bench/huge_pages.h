// How much of a host buffer the kernel backs with huge pages, from this process's
// /proc/self/smaps: the direct reads and the single copy pin a peer's buffer page by page
// (process_vm_readv, process_vm_writev), and a buffer on 4 KiB pages both slows them and makes
// their pace change from launch to launch (docs/tuning_shm.md, "Buffers on huge pages").
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <istream>
#include <utility>

#include "tools/bench/smaps.h"

namespace gyre::bench {

// Bytes of the ranges [data, data + bytes) on huge pages: per mapping that overlaps them, the
// whole overlap where the mapping's pages are huge (hugetlbfs, MAP_HUGETLB), else its
// AnonHugePages (transparent huge pages) up to the overlap. Ranges must not overlap each other.
// Exact where each range has mappings of its own; 0 where smaps cannot be read.
using Ranges = std::initializer_list<std::pair<const void*, size_t>>;
inline size_t hugePageBytes(std::istream& smaps, Ranges ranges) {
  size_t total = 0;
  for (const Mapping& m : mappings(smaps)) {
    size_t overlap = 0;
    for (const auto& [data, bytes] : ranges) {
      const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
      if (m.start < end && m.end > begin)
        overlap += std::min(m.end, end) - std::max(m.start, begin);
    }
    if (m.kernelPageKiB > 4) {
      total += overlap;  // every page of it huge
    } else {
      total += std::min(size_t(m.anonHugeKiB) * 1024, overlap);
    }
  }
  return total;
}
inline size_t hugePageBytes(Ranges ranges) {
  std::ifstream smaps("/proc/self/smaps");
  return hugePageBytes(smaps, ranges);
}

}  // namespace gyre::bench
