// Shared-memory links are mapped whole when a connection is made, at both ends, so a call that
// first reaches a slot takes no page fault: the first calls over links that a size used for
// the first time had taken up to twice their time (docs/perf/run_to_run.md, "Links mapped
// whole at set-up").
#include <doctest/doctest.h>

#include "tests/harness/smaps.h"
#include "tests/harness/thread_ranks.h"
#include "transport/shm/shm_connection.h"

namespace gyre {
namespace {

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
  for (const test::Mapping& m : test::mappings()) {
    if (!m.unnamed || m.sizeKiB != segmentKiB) continue;
    ++ends;
    CHECK(m.rssKiB == m.sizeKiB);
  }
  CHECK(ends == 2);  // the two ranks' one connection, mapped by each
}

}  // namespace
}  // namespace gyre
