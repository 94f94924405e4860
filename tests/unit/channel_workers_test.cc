// Channel workers: every channel runs once per call, channel 0 on the caller, the helpers are
// started once and reused, and run() returns only when every channel has returned.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/core/channel_workers.h"

using namespace gyre;

TEST_CASE("channel workers: each channel once, on kept threads") {
  ChannelWorkers workers;
  std::mutex m;
  std::set<std::thread::id> helperThreads;
  for (int round = 0; round < 50; ++round) {
    const int n = 1 + round % 4;
    std::vector<int> runs(size_t(n), 0);
    std::thread::id channel0;
    workers.run(n, [&](int c) {
      if (c > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // late finishers
      std::lock_guard lock(m);
      ++runs[size_t(c)];
      if (c == 0) {
        channel0 = std::this_thread::get_id();
      } else {
        helperThreads.insert(std::this_thread::get_id());
      }
    });
    CAPTURE(round);
    for (int c = 0; c < n; ++c) CHECK(runs[size_t(c)] == 1);  // all returned before run() did
    CHECK(channel0 == std::this_thread::get_id());
  }
  CHECK(workers.started() == 3);
  CHECK(helperThreads.size() == 3);  // the same three threads served every round
}

TEST_CASE("channel workers: one channel starts no thread") {
  ChannelWorkers workers;
  int ran = 0;
  workers.run(1, [&](int c) { ran += c + 1; });
  workers.run(0, [&](int) { ran += 100; });
  CHECK(ran == 1);
  CHECK(workers.started() == 0);
}
