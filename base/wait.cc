#include "base/wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void notifyAll(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers) {
  // The caller's store to `value` must be visible before `sleepers` is read, as the sleeper's
  // increment is before its look at `value`: without the fence the load may pass the store (a
  // store buffer), both sides miss each other, and the sleeper wakes only at its timeout.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) futex(&value, FUTEX_WAKE, INT_MAX, nullptr);
}

void sleepWhileEqual(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers,
                     uint32_t observed, Clock::time_point until) {
  const auto now = Clock::now();
  if (until <= now) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (value.load(std::memory_order_seq_cst) == observed) {
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
