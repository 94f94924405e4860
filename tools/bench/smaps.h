// This process's memory mappings as /proc/self/smaps lists them: where each lies, what of it is
// mapped and on which pages. Read by gyre-bench (huge_pages.h) and the tests (tests/harness).
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

namespace gyre::bench {

struct Mapping {
  uintptr_t start = 0, end = 0;
  long sizeKiB = 0, rssKiB = 0;  // Rss: the pages mapped in this process
  long kernelPageKiB = 4;        // 2048 and more: hugetlbfs (MAP_HUGETLB), every page huge
  long anonHugeKiB = 0;          // AnonHugePages: transparent huge pages in it
  bool unnamed = false;          // a file with no name any more (a shared-memory segment)
};

inline std::vector<Mapping> mappings(std::istream& smaps) {
  std::vector<Mapping> found;
  auto field = [](const std::string& line, const char* name) {
    return line.rfind(name, 0) == 0 ? std::stol(line.substr(std::string(name).size())) : -1L;
  };
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's first line starts with its address in lower-case hex; its fields, with names.
    const bool header =
        !line.empty() && ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'));
    if (header) {
      Mapping m;
      const size_t dash = line.find('-');
      m.start = uintptr_t(std::stoull(line.substr(0, dash), nullptr, 16));
      m.end = uintptr_t(std::stoull(line.substr(dash + 1), nullptr, 16));
      m.unnamed = line.size() > 10 && line.compare(line.size() - 10, 10, " (deleted)") == 0;
      found.push_back(m);
    } else if (found.empty()) {
      continue;
    } else if (const long v = field(line, "Size:"); v >= 0) {
      found.back().sizeKiB = v;
    } else if (const long v = field(line, "Rss:"); v >= 0) {
      found.back().rssKiB = v;
    } else if (const long v = field(line, "KernelPageSize:"); v >= 0) {
      found.back().kernelPageKiB = v;
    } else if (const long v = field(line, "AnonHugePages:"); v >= 0) {
      found.back().anonHugeKiB = v;
    }
  }
  return found;
}

inline std::vector<Mapping> mappings() {
  std::ifstream smaps("/proc/self/smaps");
  return mappings(smaps);
}

}  // namespace gyre::bench
