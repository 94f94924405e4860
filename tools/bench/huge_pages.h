// How much of a host buffer the kernel backs with transparent huge pages, from this process's
// /proc/self/smaps: the direct reads and the single copy pin a peer's buffer page by page
// (process_vm_readv, process_vm_writev), and a buffer on 4 KiB pages both slows them and makes
// their pace change from launch to launch (docs/tuning_shm.md, "Buffers on huge pages").
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <istream>
#include <string>
#include <utility>

namespace gyre::bench {

// Bytes of the ranges [data, data + bytes) on huge pages: per mapping that overlaps them, the
// whole overlap where the mapping's pages are huge (hugetlbfs, MAP_HUGETLB), else its
// AnonHugePages (transparent huge pages) up to the overlap. Ranges must not overlap each other.
// Exact where each range has mappings of its own; 0 where smaps cannot be read.
using Ranges = std::initializer_list<std::pair<const void*, size_t>>;
inline size_t hugePageBytes(std::istream& smaps, Ranges ranges) {
  size_t total = 0, overlap = 0;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0, kib = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      overlap = 0;  // a mapping's first line
      for (const auto& [data, bytes] : ranges) {
        const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
        if (lo < end && hi > begin)
          overlap += std::min<uintptr_t>(hi, end) - std::max<uintptr_t>(lo, begin);
      }
    } else if (overlap && std::sscanf(line.c_str(), "KernelPageSize: %lu kB", &kib) == 1) {
      if (kib > 4) total += overlap, overlap = 0;  // every page of it huge
    } else if (overlap && std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kib) == 1) {
      total += std::min<size_t>(size_t(kib) * 1024, overlap);
    }
  }
  return total;
}
inline size_t hugePageBytes(Ranges ranges) {
  std::ifstream smaps("/proc/self/smaps");
  return hugePageBytes(smaps, ranges);
}

}  // namespace gyre::bench
