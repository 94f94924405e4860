// Waiting on a 32-bit counter with a deadline: spin briefly, then sleep on a futex. The
// counter may live in process-private or shared memory (shared futexes work across
// processes). Notifiers only make the wake syscall when a waiter announced itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gyre {

using Clock = std::chrono::steady_clock;

// Clock::now() to within a scheduler tick (a few ms), for a few nanoseconds: enough for a
// deadline seconds away, taken once per call.
Clock::time_point coarseNow();

struct alignas(64) WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> waiters{0};
};

// Wakes every thread sleeping on `word` if any announced itself.
void notifyAll(WaitWord& word);

// Sleeps while word.value == observed, at most until `until`. Returns early on a wake,
// a change of the value or a spurious wake-up; callers re-check their condition.
void sleepWhileEqual(WaitWord& word, uint32_t observed, Clock::time_point until);

// The same for a value and a count of its sleepers kept apart (the value shares its cache
// line with data, the count does not).
void notifyAll(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers);
void sleepWhileEqual(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers,
                     uint32_t observed, Clock::time_point until);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace gyre
