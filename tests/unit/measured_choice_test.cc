// The measured choice's bookkeeping (runtime/core/measured_choice.h): which calls it measures,
// the order of its trials, and the decision from every rank's times.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/core/measured_choice.h"
#include "runtime/core/tuner.h"
#include "tests/unit/tuner_geometry.h"

using namespace gyre;

namespace {

constexpr Collective kColl = Collective::all_gather;
constexpr size_t kBytes = 64 << 10;
constexpr int kEach = MeasuredChoice::kTrialsEach;
constexpr int kWarming = MeasuredChoice::kWarmingTrials;
constexpr int kCounted = kEach - kWarming;

// Runs every trial of the class on one rank: trial t starts at t * 1000 ns and lasts
// lasting(algorithm index, t) ns. Returns this rank's times.
template <class Lasting>
std::vector<uint64_t> runTrials(MeasuredChoice& m, const std::vector<Algorithm>& algorithms,
                                Lasting lasting) {
  m.start(kColl, kBytes, algorithms);
  for (size_t t = 0; !m.trialsDone(kColl, kBytes); ++t) {
    const size_t a = t / size_t(kEach);
    CHECK(m.nextTrial(kColl, kBytes) == algorithms[a]);  // each algorithm's trials in a row
    const uint64_t start = 1000000 * t;
    m.begin(kColl, kBytes, start);
    CHECK_FALSE(m.trialsDone(kColl, kBytes));  // not while a trial has not ended
    m.end(start + lasting(a, t));
  }
  return m.times(kColl, kBytes);
}

// The ring at `ringNs` a trial against the direct read at 1000 but for its counted trial `slow`
// (0 the first counted), which takes `slowNs`: the decision and the read's median.
std::pair<Algorithm, uint64_t> readWithOneSlowTrial(uint64_t ringNs, int slow, uint64_t slowNs) {
  MeasuredChoice m;
  const auto times =
      runTrials(m, {Algorithm::ring, Algorithm::directRead}, [&](size_t a, size_t t) -> uint64_t {
        if (a == 0) return ringNs;
        return int(t) % kEach == kWarming + slow ? slowNs : 1000;
      });
  const Algorithm chosen = m.decide(kColl, kBytes, times, 1);
  return {chosen, m.medians(kColl, kBytes)[1].second};
}

}  // namespace

TEST_CASE("measured choice: the collectives of one size on every rank, 16 KiB to 64 MiB") {
  CHECK(MeasuredChoice::measures(Collective::all_reduce, 16 << 10));
  CHECK(MeasuredChoice::measures(Collective::broadcast, (64 << 20) - 1));
  CHECK_FALSE(MeasuredChoice::measures(Collective::all_reduce, (16 << 10) - 1));
  CHECK_FALSE(MeasuredChoice::measures(Collective::all_reduce, 64 << 20));
  for (Collective c : {Collective::all_gather, Collective::reduce, Collective::reduce_scatter,
                       Collective::gather, Collective::scatter, Collective::all_to_all}) {
    CHECK(MeasuredChoice::measures(c, 1 << 20));
  }
  for (Collective c : {Collective::all_gather_v, Collective::all_to_all_v, Collective::send_recv}) {
    CHECK_FALSE(MeasuredChoice::measures(c, 1 << 20));
  }
}

TEST_CASE("measured choice: the fastest median wins, each algorithm's first trials left out") {
  MeasuredChoice m;
  const std::vector<Algorithm> algorithms{Algorithm::oneshot, Algorithm::ring,
                                          Algorithm::directRead};
  // The read is fastest but for its first calls, which took twice as long as the others.
  const auto times = runTrials(m, algorithms, [](size_t a, size_t t) -> uint64_t {
    if (a == 2) return t % kEach < kWarming ? 6000 : 3000 + 10 * t;
    return a == 0 ? 5000 : 4000;
  });
  CHECK(m.trialCalls() == uint64_t(kEach * 3));
  CHECK(m.settled(kColl, kBytes) == nullptr);
  CHECK(m.decide(kColl, kBytes, times, 1) == Algorithm::directRead);
  REQUIRE(m.settled(kColl, kBytes) != nullptr);
  CHECK(*m.settled(kColl, kBytes) == Algorithm::directRead);
  CHECK(m.decisions() == 1);
  CHECK(m.changes() == 1);
  const auto medians = m.medians(kColl, kBytes);
  REQUIRE(medians.size() == 3);
  CHECK(medians[0].second == 5000);
  CHECK(medians[1].second == 4000);
  // Its counted trials: from 2 * kEach + kWarming to 3 * kEach - 1, rising evenly: their median
  // the middle of the first and the last.
  CHECK(medians[2].second == 3000 + 10 * (2 * kEach + kWarming + 3 * kEach - 1) / 2);
  // Another size class of the collective starts afresh.
  CHECK(m.settled(kColl, 2 * kBytes) == nullptr);
  m.reset();
  CHECK(m.settled(kColl, kBytes) == nullptr);
}

TEST_CASE("measured choice: the median is the loop's pace, a trial that lost its core aside") {
  SUBCASE("calls that run ahead: short and long trials in turn") {
    // The pick's trials alternate 1000 and 7000 ns (their loop's pace 4000), the tree's 3000:
    // the tree is faster although the pick's fastest trial is faster than any of the tree's.
    MeasuredChoice m;
    const auto times =
        runTrials(m, {Algorithm::oneshot, Algorithm::tree}, [](size_t a, size_t t) -> uint64_t {
          if (a == 1) return 3000;
          return t % 2 ? 1000 : 7000;
        });
    CHECK(m.decide(kColl, kBytes, times, 1) == Algorithm::tree);
  }
  SUBCASE("one trial far over the algorithm's others") {
    // The read's first counted trial took 40 times the others (a preemption): the read is the
    // fastest; in a mean of four it would be 10 times the ring's.
    CHECK(readWithOneSlowTrial(2000, 0, 40000) == std::pair{Algorithm::directRead, uint64_t(1000)});
  }
  SUBCASE("one trial a few times the others") {
    // Five times the others: in a mean of four the read's would be 2000, over the ring's.
    CHECK(readWithOneSlowTrial(1900, kCounted - 1, 5000) ==
          std::pair{Algorithm::directRead, uint64_t(1000)});
  }
  SUBCASE("the last trial carries the next algorithm's first call") {
    // As a two-rank broadcast's direct read of 64 KiB did (2.8-3.7 us, then 7.0): 2.4 times
    // the others, which a mean of four puts over the ring's 1300 and its median does not.
    CHECK(readWithOneSlowTrial(1300, kCounted - 1, 2400) ==
          std::pair{Algorithm::directRead, uint64_t(1000)});
  }
}

TEST_CASE("measured choice: the model's pick stays within the margin") {
  SUBCASE("3 % faster: the pick stays") {
    MeasuredChoice m;
    const auto times = runTrials(m, {Algorithm::ring, Algorithm::tree},
                                 [](size_t a, size_t) -> uint64_t { return a == 0 ? 1000 : 970; });
    CHECK(m.decide(kColl, kBytes, times, 1) == Algorithm::ring);
    CHECK(m.changes() == 0);
  }
  SUBCASE("12 % faster: it replaces the pick") {
    MeasuredChoice m;
    const auto times = runTrials(m, {Algorithm::ring, Algorithm::tree},
                                 [](size_t a, size_t) -> uint64_t { return a == 0 ? 1000 : 880; });
    CHECK(m.decide(kColl, kBytes, times, 1) == Algorithm::tree);
    CHECK(m.changes() == 1);
  }
  SUBCASE("the first calls of a class run the pick untimed") {
    MeasuredChoice m;
    m.start(kColl, kBytes, {Algorithm::ring, Algorithm::tree});
    for (int i = 0; i < MeasuredChoice::kSettlingCalls; ++i) CHECK(m.settling(kColl, kBytes));
    CHECK_FALSE(m.settling(kColl, kBytes));
    CHECK(m.nextTrial(kColl, kBytes) == Algorithm::ring);
    CHECK(m.trialCalls() == 0);
  }
  SUBCASE("one algorithm settles at once, with no trial") {
    MeasuredChoice m;
    m.start(kColl, kBytes, {Algorithm::directRead});
    REQUIRE(m.settled(kColl, kBytes) != nullptr);
    CHECK(*m.settled(kColl, kBytes) == Algorithm::directRead);
    CHECK(m.trialCalls() == 0);
  }
}

TEST_CASE("measured choice: a trial lasts from the last rank's start to the last rank's end") {
  // Two ranks: rank 1 comes 50 us late to every ring trial, and waits for nobody; rank 0's
  // ring trials last 52 us, all but 2 of them waiting for rank 1. The tree takes 4 us after
  // both came. Timed on rank 0 alone the ring would lose; from the last start it takes 2 us.
  const std::vector<Algorithm> algorithms{Algorithm::tree, Algorithm::ring};
  MeasuredChoice zero, one;
  const auto mine = runTrials(zero, algorithms,
                              [](size_t a, size_t) -> uint64_t { return a == 0 ? 4000 : 52000; });
  std::vector<uint64_t> theirs = mine;
  for (size_t t = 0; t < theirs.size() / 2; ++t) {
    if (t / size_t(kEach) == 1) theirs[2 * t] += 50000;  // starts late, ends with rank 0
  }
  one.start(kColl, kBytes, algorithms);
  std::vector<uint64_t> every = mine;
  every.insert(every.end(), theirs.begin(), theirs.end());
  CHECK(zero.decide(kColl, kBytes, every, 2) == Algorithm::ring);
  // Times for another number of ranks are refused.
  MeasuredChoice other;
  runTrials(other, algorithms, [](size_t, size_t) -> uint64_t { return 1000; });
  CHECK_THROWS_AS(other.decide(kColl, kBytes, every, 3), Failure);
}

TEST_CASE("measured choice: the tuner tries its pick first, then the close ones it rates") {
  Tuner t(Tuner::sharedMemory(true), "", test::kChunk, test::kSlot);
  t.setOneShot(64 << 10);
  t.setDirectRead(true);
  for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::broadcast}) {
    for (size_t bytes : {size_t(16) << 10, size_t(256) << 10, size_t(4) << 20}) {
      CAPTURE(int(c));
      CAPTURE(bytes);
      const Choice pick = t.choose(c, bytes, 2);
      const auto algorithms = t.trialAlgorithms(pick, c, bytes, 2);
      REQUIRE_FALSE(algorithms.empty());
      CHECK(algorithms.front() == pick.algorithm);
      for (size_t i = 1; i < algorithms.size(); ++i) {
        CHECK(algorithms[i] != pick.algorithm);
        CHECK(algorithms[i] != Algorithm::hierarchical);
        const double predicted = t.predictUs(algorithms[i], c, bytes, 2);
        CHECK(predicted >= 0);
        CHECK(predicted <= Tuner::kTrialSpread * pick.predictedUs);
        if (i > 1) CHECK(predicted >= t.predictUs(algorithms[i - 1], c, bytes, 2));
      }
    }
  }
  // The direct read, which the candidates' rules keep from small broadcasts close by, is tried.
  const Choice small = t.choose(Collective::broadcast, 64 << 10, 2);
  CHECK(small.algorithm != Algorithm::directRead);
  const auto tried = t.trialAlgorithms(small, Collective::broadcast, 64 << 10, 2);
  CHECK(std::find(tried.begin(), tried.end(), Algorithm::directRead) != tried.end());
}
