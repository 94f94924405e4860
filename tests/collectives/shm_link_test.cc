// Shared-memory links: mapped whole when a connection is made, at both ends, so a call that
// first reaches a slot takes no page fault (the first calls over links that a size used for
// the first time had taken up to twice their time, docs/perf/run_to_run.md, "Links mapped
// whole at set-up"); and which calls their single copy carries.
#include <sched.h>

#include <doctest/doctest.h>

#include <vector>

#include "tests/harness/single_copy.h"
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

// Holds this thread, and the threads it starts, on one CPU until it goes out of scope.
class OnOneCpu {
 public:
  OnOneCpu() {
    REQUIRE(sched_getaffinity(0, sizeof saved_, &saved_) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &saved_)) ++cpu;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  }
  ~OnOneCpu() { sched_setaffinity(0, sizeof saved_, &saved_); }

 private:
  cpu_set_t saved_;
};

// Where ranks share cores the gathers from 2 MiB and the scatters from 32 MiB leave the single
// copy to the slots, which the senders fill (Tuner::slotWrites); smaller calls keep it. Three ranks
// on one CPU, through the ring's slots of 128 KiB (no host window), every output poisoned first.
TEST_CASE(
    "shm single copy: large gathers and scatters go through the slots where ranks share cores") {
  if (const std::string missing = test::singleCopyMissing(); !missing.empty()) {
    MESSAGE("skipped: " << missing);
    return;
  }
  OnOneCpu oneCpu;
  CommConfig config;
  config.transport = "shm";
  config.oneShotBytes = 0;
  config.algorithm = "ring";
  config.timeout = std::chrono::seconds(60);
  const int n = 3;
  test::ThreadJob job(n, config, "shm-gathers-single-copy");
  enum class Call { all_gather, gather, scatter };
  // The single copies of one call of `count` floats a rank, summed over the ranks.
  auto directSends = [&](Call call, size_t count) {
    uint64_t before = 0, after = 0;
    for (int r = 0; r < n; ++r) before += job.comm(r).directSends();
    std::vector<std::string> wrong(n);
    job.run([&](Communicator& c, int r) {
      std::vector<float> in(call == Call::scatter ? count * n : count), out(count * n, -1.0f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = float(r * 1000003 + int(i % 1000003));
      if (call == Call::all_gather) c.allGather(in.data(), out.data(), count, DataType::f32);
      if (call == Call::gather) c.gather(in.data(), out.data(), count, DataType::f32, 0);
      if (call == Call::scatter) c.scatter(in.data(), out.data(), count, DataType::f32, 0);
      const bool gathered = call == Call::all_gather || r == 0;
      const size_t blocks = call == Call::scatter ? 1 : gathered ? n : 0;
      for (size_t b = 0; b < blocks && wrong[r].empty(); ++b) {
        for (size_t i = 0; i < count; ++i) {
          const size_t from = call == Call::scatter ? 0 : b;  // the rank that sent it
          const size_t at = call == Call::scatter ? size_t(r) * count + i : i;
          if (out[b * count + i] != float(int(from) * 1000003 + int(at % 1000003))) {
            wrong[r] = "rank " + std::to_string(r) + ": block " + std::to_string(b) + " element " +
                       std::to_string(i) + " wrong";
            break;
          }
        }
      }
    });
    for (int r = 0; r < n; ++r) CHECK_MESSAGE(wrong[r].empty(), wrong[r]);
    for (int r = 0; r < n; ++r) after += job.comm(r).directSends();
    return after - before;
  };
  const size_t small = (64 << 10) / 4, large = (1 << 20) / 4;  // 192 KiB and 3 MiB gathered
  CHECK(directSends(Call::all_gather, small) > 0);
  CHECK(directSends(Call::all_gather, large) == 0);
  CHECK(directSends(Call::gather, small) > 0);
  CHECK(directSends(Call::gather, large) == 0);
  CHECK(directSends(Call::scatter, large) > 0);
  CHECK(directSends(Call::scatter, (32 << 20) / 4 / n + 1) == 0);  // 32 MiB and more: slots
}

}  // namespace
}  // namespace gyre
