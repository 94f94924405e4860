// The lock a communicator's calls take: one thread runs a call at a time, and almost always
// the same thread calls. Unlocking is a plain store and a look at the count of sleepers. A
// locked instruction there (a mutex's) waits for the call's last stores, to lines that other
// ranks poll, to leave the store buffer: about a crossing between the CPUs per call
// (docs/perf/small_calls.md). A thread that finds the lock held sleeps on its word
// (base/wait.h) and the unlock wakes it; the order between the unlock's store and its look at
// the sleepers is the sleepers' to pay (WakeOrder::sleeperBarrier) where the kernel allows,
// else the unlock fences as a mutex would.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/wait.h"

namespace gyre {

class CallLock {
 public:
  void lock() {
    if (held_.exchange(1, std::memory_order_acquire) == 0) return;
    lockContended();
  }
  bool try_lock() {
    return held_.load(std::memory_order_relaxed) == 0 &&
           held_.exchange(1, std::memory_order_acquire) == 0;
  }
  void unlock() {
    held_.store(0, std::memory_order_release);
    notifyAll(held_, sleepers_, order_);
  }

 private:
  void lockContended();
  std::atomic<uint32_t> held_{0};
  std::atomic<uint32_t> sleepers_{0};
  const WakeOrder order_ =
      registerSleeperBarriers() ? WakeOrder::sleeperBarrier : WakeOrder::notifierFence;
};

}  // namespace gyre
