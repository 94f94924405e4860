// Shared-memory links are mapped whole when a connection is made, at both ends, so a call that
// first reaches a slot takes no page fault: the first calls over links that a size used for
// the first time had run at up to twice their pace (docs/perf/run_to_run.md, "Links mapped
// whole at set-up").
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/harness/thread_ranks.h"
#include "transport/shm/shm_connection.h"

namespace gyre {
namespace {

struct Mapping {
  long sizeKiB = 0, rssKiB = 0;
};

// This process's mappings of files that have no name any more (shared-memory segments).
std::vector<Mapping> unnamedFileMappings() {
  std::ifstream smaps("/proc/self/smaps");
  std::vector<Mapping> found;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const bool header =
        !line.empty() && ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'));
    if (header) {
      inside = line.size() > 10 && line.compare(line.size() - 10, 10, " (deleted)") == 0;
      if (inside) found.emplace_back();
    } else if (inside && line.rfind("Size:", 0) == 0) {
      found.back().sizeKiB = std::stol(line.substr(5));
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      found.back().rssKiB = std::stol(line.substr(4));
    }
  }
  return found;
}

TEST_CASE("shm links are mapped whole at both ends when they are made") {
  CommConfig config;
  config.transport = "shm";
  config.nSlots = 3;
  config.slotBytes = 40 << 10;  // a segment size no other mapping here has
  config.oneShotBytes = 0;      // no host window
  const long segmentKiB =
      long((ShmLayout::of(config.nSlots, config.slotBytes).total + 4095) / 4096 * 4);
  test::ThreadJob job(2, config, "shm-links-mapped");
  int ends = 0;
  for (const Mapping& m : unnamedFileMappings()) {
    if (m.sizeKiB != segmentKiB) continue;
    ++ends;
    CHECK(m.rssKiB == m.sizeKiB);
  }
  CHECK(ends == 2);  // the two ranks' one connection, mapped by each
}

}  // namespace
}  // namespace gyre
