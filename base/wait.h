// Waiting on a 32-bit counter with a deadline: spin briefly, then sleep on a futex. The
// counter may live in process-private or shared memory (shared futexes work across
// processes). Notifiers only make the wake syscall when a waiter announced itself.
#pragma once

#include <sched.h>

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

// The busy phase of a wait, before it sleeps: how long it polls (GYRE_SPIN_US) and whether
// it yields the core between polls (ranks outnumber cores: the rank waited for may need this
// one). Where each rank has a core it polls back to back: yielding hands the core to any
// other runnable thread for a whole time slice, and sleeping makes the peer's wake-up an
// interrupt to an idle CPU (performance.md, "the slow mode").
struct BusyPhase {
  Clock::duration spin{};
  bool yield = false;
};

// Polls `ready` until it holds (true) or the busy phase has passed (false).
template <class Ready>
bool pollFor(const BusyPhase& busy, Ready&& ready) {
  if (busy.spin <= Clock::duration::zero()) return false;
  Clock::time_point end{};
  while (true) {
    // The clock only after 64 polls: a tiny call's wait is a few polls long.
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      if (busy.yield) {
        sched_yield();
      } else {
        cpuRelax();
      }
    }
    const auto now = Clock::now();
    if (end == Clock::time_point{}) end = now + busy.spin;
    if (now >= end) return false;
  }
}

}  // namespace gyre
