// The placement probe during calls (OneShot::remeasurePlacement), over a host window in this
// process with ranks as threads: every rank gets rank 0's figure of the same round, round after
// round, and a partner that never comes costs rank 0 the call's deadline, naming it.
#include <doctest/doctest.h>
#include <thread>
#include <vector>

#include "algorithms/oneshot.h"
#include "base/status.h"
#include "tests/unit/test_window.h"

namespace gyre {
namespace {

// The partner alternates between rank 1 (ranks with cores of their own) and rank 2 (the first
// rank of another block, where ranks share cores pinned in blocks).
TEST_CASE("placement probe: every rank gets rank 0's figure of each round, either partner") {
  // At least `rounds`, and on until one is measured: a round goes unmeasured where a rank lost
  // its CPU in the middle of it, every one of them on a loaded machine. All ranks get the same
  // figures, so all stop at the same round.
  const int n = 3, rounds = 300, maxRounds = 20000;
  TestWindow window(n);
  std::vector<std::vector<uint32_t>> figures(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      OneShot rank = window.rank(r);
      try {
        bool anyMeasured = false;
        for (int i = 0; i < maxRounds && (i < rounds || !anyMeasured); ++i) {
          figures[r].push_back(
              rank.remeasurePlacement(window.call(r, uint64_t(i + 1), std::chrono::seconds(30)),
                                      /*partner=*/1 + i % 2));
          anyMeasured = anyMeasured || figures[r].back() > 0;
        }
      } catch (const Failure& f) {
        errors[r] = f.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) REQUIRE_MESSAGE(errors[r].empty(), errors[r]);
  REQUIRE(figures[1].size() == figures[0].size());
  REQUIRE(figures[2].size() == figures[0].size());
  int measured = 0;
  for (size_t i = 0; i < figures[0].size(); ++i) {
    CHECK(figures[1][i] == figures[0][i]);
    CHECK(figures[2][i] == figures[0][i]);
    if (figures[0][i] > 0) ++measured;
    // A round trip is two cache-line transfers; at most the 200 µs a trip may take.
    CHECK(figures[0][i] <= 200000);
  }
  MESSAGE(measured << " of " << figures[0].size() << " rounds measured");
  CHECK(measured > 0);
}

TEST_CASE("placement probe: a partner that never comes costs rank 0 the deadline, naming it") {
  for (int partner : {1, 2}) {
    CAPTURE(partner);
    TestWindow window(3);
    OneShot zero = window.rank(0);
    const auto start = Clock::now();
    try {
      zero.remeasurePlacement(window.call(0, 1, std::chrono::milliseconds(200)), partner);
      FAIL("the probe returned without its partner");
    } catch (const Failure& f) {
      CHECK(f.status().code == Code::timeout);
      CHECK(std::string(f.what()).find("waiting for the placement probe's answer from rank " +
                                       std::to_string(partner)) != std::string::npos);
    }
    CHECK(Clock::now() - start < std::chrono::seconds(10));
  }
  // A partner outside the window, or none: nothing is measured, nothing waited for.
  TestWindow window(2);
  OneShot zero = window.rank(0);
  CHECK(zero.remeasurePlacement(window.call(0, 1, std::chrono::milliseconds(200)), -1) == 0);
  CHECK(zero.remeasurePlacement(window.call(0, 1, std::chrono::milliseconds(200)), 2) == 0);
}

}  // namespace
}  // namespace gyre
