// Failures and progress shared between the ranks of a communicator through the store, so
// every rank names the rank that failed first and a timeout names the rank that never came.
//  - The first rank to fail records its cause with compare_set; a rank that fails later
//    (typically woken by a neighbour closing its connections) reports that cause instead of
//    its own symptom. The failing rank records before it closes anything.
//  - A background thread publishes this rank's last started and completed operation at
//    most every 200 ms, so the hot path never waits on the store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "link/link.h"
#include "runtime/store/store.h"

namespace gyre {

class FailureBoard {
 public:
  FailureBoard(std::shared_ptr<Store> store, int rank, int nranks);
  ~FailureBoard();

  // A few stores, inline on every call's path: the publisher sends them later.
  void started(const OpDesc& op) { record(started_, op); }
  void completed(const OpDesc& op) { record(completed_, op); }

  // The status this rank should report for `local`: itself if this rank failed first (or
  // the store is unreachable), else the first failure, named.
  Status report(const Status& local, const OpDesc& op);
  // The same for a failure outside any call: `what` says what this rank was doing
  // ("setting up the communicator").
  Status report(const Status& local, const std::string& what);

  // The first failure any rank recorded, or ok (one non-blocking store read).
  Status recorded();

  // invalid_usage naming a rank whose published progress shows it in the same call (same
  // sequence number) with another kind, type, op, root or count; else ok. A wait that stalls
  // asks this, so ranks that disagree in a way no data reveals (every rank waiting to
  // receive, or one with count 0 that sent nothing) fail in seconds instead of at the
  // timeout. One store read per rank.
  Status disagreement(const OpDesc& op);

  // Why `op` cannot finish, from every rank's published progress, e.g. "rank 3 never
  // entered all_reduce #17 (its last completed: broadcast #16)".
  std::string attribute(const OpDesc& op);

 private:
  struct Progress {
    bool any = false;
    OpDesc started, completed;
    bool hasStarted = false, hasCompleted = false;
  };
  static std::string encode(const Progress& p);
  static Progress decode(const std::string& text);
  bool readProgress(int rank, Progress& progress);  // false: none published, or no store
  void publishLoop();
  // The operation thread writes its progress, the publisher reads it: a sequence lock over
  // atomic words (odd version: a write in progress), so a call pays a few stores, no lock.
  static constexpr int kWords = 3;  // seq, count, root | collective | type | op
  void record(std::atomic<uint64_t>* words, const OpDesc& op) {
    const uint64_t v = version_.load(std::memory_order_relaxed);
    version_.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    words[0].store(op.seq, std::memory_order_relaxed);
    words[1].store(op.count, std::memory_order_relaxed);
    // The root in the high half; collective, type and op a byte each; bit 0 "recorded".
    words[2].store(uint64_t(uint32_t(op.root)) << 32 | uint64_t(op.coll) << 24 |
                       uint64_t(op.dtype) << 16 | uint64_t(op.op) << 8 | 1,
                   std::memory_order_relaxed);
    version_.store(v + 2, std::memory_order_release);
  }
  Progress snapshot(uint64_t& version) const;

  std::shared_ptr<Store> store_;
  const int rank_;
  const int nranks_;
  std::mutex mutex_;  // stop_ and the publisher's sleep
  std::condition_variable wake_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> started_[kWords] = {}, completed_[kWords] = {};
  bool stop_ = false;
  std::thread publisher_;
};

}  // namespace gyre
