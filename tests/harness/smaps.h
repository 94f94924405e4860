// This process's memory mappings as /proc/self/smaps lists them: what is mapped of each.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gyre::test {

struct Mapping {
  uintptr_t start = 0;
  long sizeKiB = 0, rssKiB = 0;  // Rss: the pages mapped in this process
  bool unnamed = false;          // a file with no name any more (a shared-memory segment)
};

inline std::vector<Mapping> mappings() {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<Mapping> found;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's first line starts with its address in lower-case hex; its fields, with names.
    const bool header =
        !line.empty() && ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'));
    if (header) {
      Mapping m;
      m.start = uintptr_t(std::stoull(line.substr(0, line.find('-')), nullptr, 16));
      m.unnamed = line.size() > 10 && line.compare(line.size() - 10, 10, " (deleted)") == 0;
      found.push_back(m);
    } else if (!found.empty() && line.rfind("Size:", 0) == 0) {
      found.back().sizeKiB = std::stol(line.substr(5));
    } else if (!found.empty() && line.rfind("Rss:", 0) == 0) {
      found.back().rssKiB = std::stol(line.substr(4));
    }
  }
  return found;
}

}  // namespace gyre::test
