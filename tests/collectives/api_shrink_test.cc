// gyreCommShrink and gyreCommRevoke: the ranks that remain after one left (its communicator
// destroyed) or stopped answering stop what waits on it, make a communicator without it and go
// on, with exact results; misuse is refused. Ranks as threads.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "tests/harness/c_api_ranks.h"

using gyre::test::initComms;

namespace {

// Every remaining rank: a new communicator without `gone`, checked with an all-reduce.
void shrinkAndSum(gyreComm_t c, int r, int n, int gone, int flags) {
  gyreComm_t small = nullptr;
  OK(gyreCommShrink(c, &gone, 1, &small, nullptr, flags));
  int rank = -1, count = -1;
  OK(gyreCommUserRank(small, &rank));
  OK(gyreCommCount(small, &count));
  CHECK(rank == (r < gone ? r : r - 1));  // the old order kept
  CHECK(count == n - 1);
  std::vector<int64_t> v(10000, r);
  OK(gyreAllReduce(v.data(), v.data(), v.size(), gyreInt64, gyreSum, small, nullptr));
  const int64_t want = int64_t(n) * (n - 1) / 2 - gone;
  for (int64_t x : v) REQUIRE(x == want);
  OK(gyreCommDestroy(small));
}

// `body` on every rank's thread but `gone`'s, which stays silent with its communicator kept;
// every communicator is destroyed at the end. Waits are far longer than the test may take.
void onRanksButSilent(int n, int gone, const std::function<void(gyreComm_t, int)>& body) {
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = 60000;
  auto comms = initComms(n, &config);
  gyre::test::onThreads(n, [&](int r) {
    if (r != gone) body(comms[r], r);
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
}

// An asynchronous all-reduce of `x` on `c`, which waits on a rank that never calls it.
gyreWork_t stuckAllReduce(gyreComm_t c, float& x) {
  gyreWork_t stuck = nullptr;
  OK(gyreGroupStart());
  OK(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, c, nullptr));
  OK(gyreGroupEndAsync(&stuck));
  return stuck;
}

}  // namespace

TEST_CASE("shrink: the ranks left after one destroyed its communicator go on without it") {
  const int n = 4, gone = 2;
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  config.timeoutMs = 20000;
  auto comms = initComms(n, &config);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r];
    if (r == gone) {
      OK(gyreCommDestroy(c));
      return;
    }
    float x = 1;
    const auto start = std::chrono::steady_clock::now();
    const gyreResult_t failed = gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, c, nullptr);
    CHECK(failed != gyreSuccess);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
    shrinkAndSum(c, r, n, gone, GYRE_SHRINK_DEFAULT);
    OK(gyreCommDestroy(c));
  });
}

TEST_CASE("shrink with GYRE_SHRINK_ABORT: a call stuck on a silent rank fails at once") {
  const int n = 3, gone = 0;
  onRanksButSilent(n, gone, [&](gyreComm_t c, int r) {
    float x = 1;
    gyreWork_t stuck = stuckAllReduce(c, x);
    const auto start = std::chrono::steady_clock::now();
    shrinkAndSum(c, r, n, gone, GYRE_SHRINK_ABORT);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK(gyreWorkWait(stuck, 1000) == gyreAborted);
    OK(gyreWorkFree(stuck));
    refused(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, c, nullptr), gyreAborted, "aborted");
  });
}

TEST_CASE("shrink: misuse is refused naming the rank") {
  const int n = 2;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r], small = nullptr;
    const std::string rank = "rank " + std::to_string(r);
    const int self = r, outside = 5, twice[2] = {1 - r, 1 - r};
    refused(gyreCommShrink(c, &self, 1, &small, nullptr, 0), gyreInvalidArgument,
            rank + ": shrink: excludes this rank");
    refused(gyreCommShrink(c, &outside, 1, &small, nullptr, 0), gyreInvalidArgument,
            "excluded rank 5 is outside [0, 2)");
    refused(gyreCommShrink(c, twice, 2, &small, nullptr, 0), gyreInvalidArgument,
            "is excluded twice");
    refused(gyreCommShrink(c, nullptr, 1, &small, nullptr, 0), gyreInvalidArgument,
            "excludeRanks must list excludeCount (1) ranks");
    refused(gyreCommShrink(c, nullptr, 0, &small, nullptr, 7), gyreInvalidArgument,
            "unknown flags 7");
    refused(gyreCommShrink(c, nullptr, 0, nullptr, nullptr, 0), gyreInvalidArgument,
            "newcomm is null");
    CHECK(small == nullptr);
    // Excluding no one: a copy of the communicator, made by every rank.
    OK(gyreCommShrink(c, nullptr, 0, &small, nullptr, GYRE_SHRINK_DEFAULT));
    int v = r + 1;
    OK(gyreAllReduce(&v, &v, 1, gyreInt32, gyreSum, small, nullptr));
    CHECK(v == 3);
    OK(gyreCommDestroy(small));
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
}

TEST_CASE("revoke: a call stuck on a silent rank fails at once, and the others shrink") {
  const int n = 3, gone = 0;
  onRanksButSilent(n, gone, [&](gyreComm_t c, int r) {
    float x = 1;
    gyreWork_t stuck = stuckAllReduce(c, x);
    const auto start = std::chrono::steady_clock::now();
    OK(gyreCommRevoke(c, GYRE_REVOKE_DEFAULT));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    CHECK(gyreWorkWait(stuck, 0) == gyreAborted);  // ended before the revoke returned
    OK(gyreWorkFree(stuck));
    gyreResult_t async = gyreInternalError;
    OK(gyreCommGetAsyncError(c, &async));
    CHECK(async == gyreSuccess);
    refused(gyreAllReduce(&x, &x, 1, gyreFloat32, gyreSum, c, nullptr), gyreAborted,
            "rank " + std::to_string(r) + ": communicator revoked by gyreCommRevoke");
    refused(gyreCommFinalize(c), gyreInvalidUsage, "gyreCommFinalize after gyreCommRevoke");
    refused(gyreCommRevoke(c, 3), gyreInvalidArgument, "gyreCommRevoke: unknown flags 3");
    OK(gyreCommRevoke(c, GYRE_REVOKE_DEFAULT));  // again: nothing left to stop
    shrinkAndSum(c, r, n, gone, GYRE_SHRINK_DEFAULT);
  });
}

TEST_CASE("revoke: every rank revoked, the communicator still splits") {
  const int n = 3;
  auto comms = initComms(n);
  gyre::test::onThreads(n, [&](int r) {
    gyreComm_t c = comms[r], part = nullptr;
    OK(gyreCommRevoke(c, GYRE_REVOKE_DEFAULT));
    OK(gyreCommSplit(c, r == 1 ? GYRE_SPLIT_NOCOLOR : 0, -r, &part, nullptr));
    if (r == 1) {
      CHECK(part == nullptr);
      return;
    }
    int rank = -1;
    OK(gyreCommUserRank(part, &rank));
    CHECK(rank == (r == 0 ? 1 : 0));  // keys -r: rank 2 first
    int64_t v = int64_t(10) + r;
    OK(gyreAllReduce(&v, &v, 1, gyreInt64, gyreSum, part, nullptr));
    CHECK(v == 22);
    OK(gyreCommDestroy(part));
  });
  for (auto c : comms) CHECK(gyreCommDestroy(c) == gyreSuccess);
}
