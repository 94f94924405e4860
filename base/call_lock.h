// The lock a communicator's calls take: one thread runs a call at a time, and almost always
// the same thread calls. Unlocking is a plain store. A locked instruction there (a mutex's)
// waits for the call's last stores, to lines that other ranks poll, to leave the store buffer:
// about a crossing between the CPUs per call (docs/perf/small_calls.md). A thread that finds
// the lock held polls, yielding, then sleeps in steps of up to 100 µs: another thread's call
// or a diagnostic is rare, and it never waits on a wake-up that could be lost.
#pragma once

#include <atomic>

namespace gyre {

class CallLock {
 public:
  void lock() {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lockContended();
  }
  bool try_lock() {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  void lockContended();
  std::atomic<bool> held_{false};
};

}  // namespace gyre
