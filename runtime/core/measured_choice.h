// The measured choice (docs/tuning_measured.md): where every rank of a communicator has a core
// on one host, the calls of each collective and power-of-two size class from 16 KiB to 64 MiB
// first try the algorithms the tuner's model rates closest, a few calls each, and the class
// then keeps the one that ran fastest on every rank's clock. The
// model's prices were fitted on other machines and to loops over unchanged buffers; the
// trials time the application's own calls, on this machine, with its own data (a buffer just
// written by its owner's core, or one the readers still hold from the call before, can make
// another algorithm the fastest: docs/perf/fresh_data.md).
//
// Only bookkeeping: the communicator runs the trials (runtime/core/collectives.cc) and shares
// their times through the host window (OneShot::shareTrials), so every rank decides alike.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "algorithms/collective.h"
#include "base/wait.h"
#include "link/mailbox.h"

namespace gyre {

class MeasuredChoice {
 public:
  // Calls per algorithm, one after another: the first kWarmingTrials are not counted, while
  // the algorithm opens its links or touches their pages and fills the caches its way (a
  // direct read's next call finds the lines it read last time; at n = 2, 64 KiB, the ring's
  // first three trials took 38, 25 and 6.3 us, then 4.8-5.7, the read's 6.1 then 4.1-4.7; the
  // ring's broadcast of 256 KiB took 40, 32, 32 and 33 us, then 17-19; the direct read's
  // two-rank broadcast of 64 KiB, after the window's one-shot, took 12.6-13.2 us, then
  // alternated 2.7-3.0 and 3.8-5.5 through its next five, its loop 2.5-2.6). An even number
  // counted weighs a window broadcast's alternating short and long trials alike.
  // Interleaved trials timed each algorithm after another's calls, which no loop of one
  // algorithm meets: the two-rank all-reduce of 512 KiB by direct read took 91 us there
  // against 44 in a loop of its own.
  static constexpr int kTrialsEach = 10;
  static constexpr int kWarmingTrials = 6;
  static constexpr int kMostAlgorithms = 5;  // tried per class, the model's pick first
  // The class's first calls run the model's pick untimed, while a fresh process touches its
  // buffers and the links' pages first.
  static constexpr int kSettlingCalls = 8;
  static constexpr size_t kFromBytes = 16 << 10;
  static constexpr size_t kBelowBytes = 64 << 20;
  // An algorithm replaces the model's pick only where its median trial is this much shorter.
  static constexpr double kMargin = 0.10;
  static_assert(2 * kTrialsEach * kMostAlgorithms <= int(MailTrials::kTimes),
                "every trial's start and end fit the window's trial times");

  // The host's monotonic clock in ns: every rank's times compare.
  static uint64_t nowNs() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }
  // Whether calls of `coll` of `bytes` are measured: the collectives every rank calls with the
  // same size (not the _v forms, nor point-to-point), within the classes above.
  static bool measures(Collective coll, size_t bytes);

  // The class's settled algorithm, or nullptr while it is not settled (or not measured).
  const Algorithm* settled(Collective coll, size_t bytes) const;
  bool started(Collective coll, size_t bytes) const { return find(coll, bytes) != nullptr; }
  // Starts the class of `coll` and `bytes` with `algorithms` (the model's pick first) unless
  // it has started: a class of one algorithm settles at once.
  void start(Collective coll, size_t bytes, const std::vector<Algorithm>& algorithms);
  // Counts a call of the started class and says whether it is one of its settling calls.
  bool settling(Collective coll, size_t bytes);
  // Whether the class's next call is one of its trials: started, past its settling calls,
  // a trial still to run (not the deciding call).
  bool inTrials(Collective coll, size_t bytes) const;
  // Whether every trial of the started class has been timed: the next call decides.
  bool trialsDone(Collective coll, size_t bytes) const;
  // The algorithm of the class's next trial: each algorithm's trials in a row, the model's
  // pick first.
  Algorithm nextTrial(Collective coll, size_t bytes) const;
  // A trial starts on this rank (ns of the host's monotonic clock); it ends where this rank's
  // next call starts (end), so what the call leaves the application to pay counts too: with
  // inputs stored to before every call, a direct read's call of a two-rank broadcast of 128 KiB
  // took 12 us but its loop 30, the reader's copies of the lines taken back by the next stores.
  void begin(Collective coll, size_t bytes, uint64_t startNs);
  bool pending() const { return pending_; }
  void end(uint64_t endNs);
  // This rank's times of the class's trials, in order: start, end of each.
  const std::vector<uint64_t>& times(Collective coll, size_t bytes) const;
  // Settles the class from every rank's times (rank r's at r * times().size()): a trial lasted
  // from the last rank's start to the last rank's end, so a rank that came late does not
  // count as the others' waiting. Each algorithm's median trial (the mean of the middle
  // two) is compared: a trial that carries something else (a rank that lost its core, one tree
  // trial of 418 us among four of 59-60; the last trial of the direct read's two-rank
  // broadcast of 64 KiB, 4.9-7.0 us against 2.8-3.7, which ends where the next algorithm's
  // first call starts) moves it little. The model's pick stays unless another's
  // is kMargin shorter, so algorithms within the noise of an application's loop (other calls
  // and work between its calls of one size) do not take turns from run to run.
  Algorithm decide(Collective coll, size_t bytes, const std::vector<uint64_t>& everyRank,
                   int nranks);
  // The settled class's median trial of each of its algorithms, in ns, in its order.
  std::vector<std::pair<Algorithm, uint64_t>> medians(Collective coll, size_t bytes) const;
  // Forgets every class (the CPUs moved: the model's picks and the times may have changed).
  void reset() {
    classes_.clear();
    pending_ = false;
  }

  // Classes whose trials all ran (the last one ends where the next call starts) and whose
  // next call decides.
  uint64_t awaitingDecision() const;
  uint64_t trialCalls() const { return trialCalls_; }
  uint64_t decisions() const { return decisions_; }
  uint64_t changes() const { return changes_; }  // decisions other than the model's pick

 private:
  struct Class {
    std::vector<Algorithm> algorithms;  // the model's pick first
    std::vector<uint64_t> times;        // start, end of each trial run so far
    std::vector<uint64_t> medians;      // per algorithm, once settled by trials
    int calls = 0;                      // settling calls run so far
    bool settled = false;
    Algorithm choice = Algorithm::ring;
    // Every trial has begun (the last one ends where the next call starts).
    bool allBegun() const { return times.size() == 2 * size_t(kTrialsEach) * algorithms.size(); }
  };
  static int key(Collective coll, size_t bytes);
  const Class* find(Collective coll, size_t bytes) const;
  Class& at(Collective coll, size_t bytes);

  std::map<int, Class> classes_;
  bool pending_ = false;  // the last trial begun has not ended
  int pendingKey_ = 0;
  uint64_t trialCalls_ = 0, decisions_ = 0, changes_ = 0;
};

}  // namespace gyre
