#include "base/wait.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

namespace gyre {

namespace {
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
  // Not FUTEX_PRIVATE: the word may sit in memory shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}
}  // namespace

Clock::time_point coarseNow() {
  // The same clock as steady_clock's (CLOCK_MONOTONIC), read from the last tick.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

bool registerSleeperBarriers() {
  static const bool registered = [] {
    const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }();
  return registered;
}

void notifyAll(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers, WakeOrder order) {
  // Without an order the load of `sleepers` may pass the store to `value` (a store buffer),
  // both sides miss each other, and the sleeper wakes only at its timeout (wait.h: WakeOrder).
  if (order == WakeOrder::notifierFence) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  if (sleepers.load(std::memory_order_relaxed) != 0) futex(&value, FUTEX_WAKE, INT_MAX, nullptr);
}

void sleepWhileEqual(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers,
                     uint32_t observed, Clock::time_point until, WakeOrder order) {
  const auto now = Clock::now();
  if (until <= now) return;
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (order == WakeOrder::sleeperBarrier &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
    // Not ordered after all (the kernel refused): a notify may be missed, so the sleep is
    // short and the caller looks again.
    until = std::min(until, now + std::chrono::milliseconds(1));
  }
  if (value.load(std::memory_order_seq_cst) == observed) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    futex(&value, FUTEX_WAIT, observed, &ts);
  }
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void notifyAll(WaitWord& word) {
  notifyAll(word.value, word.waiters);
}

void sleepWhileEqual(WaitWord& word, uint32_t observed, Clock::time_point until) {
  sleepWhileEqual(word.value, word.waiters, observed, until);
}

}  // namespace gyre
