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

// Who pays for the order a wake-up needs: the notifier's store to the value must be visible
// before it reads the count of sleepers, as the sleeper's increment is before its look at the
// value. `notifierFence`: the notifier fences, on every notify (a store it makes to a line
// another CPU reads then waits for that line). `sleeperBarrier`: the notifier only keeps the
// compiler from reordering, and a sleeper, before its look, makes every CPU that runs a
// registered process pass a full barrier (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED,
// microseconds): sound only where every process that notifies on the word has registered
// (registerSleeperBarriers) and every sleeper on it uses sleeperBarrier too.
enum class WakeOrder { notifierFence, sleeperBarrier };

// Registers this process for the sleepers' barriers (once; later calls return the first
// answer): false where the kernel lacks or refuses them.
bool registerSleeperBarriers();

// The same for a value and a count of its sleepers kept apart (the value shares its cache
// line with data, the count does not).
void notifyAll(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers,
               WakeOrder order = WakeOrder::notifierFence);
void sleepWhileEqual(std::atomic<uint32_t>& value, std::atomic<uint32_t>& sleepers,
                     uint32_t observed, Clock::time_point until,
                     WakeOrder order = WakeOrder::notifierFence);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// A busy phase that learns how long polling pays. A poll that runs out was wasted: its wait
// sleeps anyway, and the core it held may have been the one the awaited rank needed (the
// ranks of several namespace hosts sharing cores: each 2 ms poll held the peer off its core
// for 2 ms). Each poll that runs out halves the phase, down to `shortest`; kMetToGrow polls in
// a row that met their condition after their first looks double it, up to `longest`. Where
// the host takes a virtual CPU away for a millisecond the polls still meet their condition,
// and the phase stays long. Shared by a communicator's threads (relaxed atomics: a lost
// update only delays the next change).
class SpinBudget {
 public:
  static constexpr uint32_t kMetToGrow = 256;
  SpinBudget(Clock::duration shortest, Clock::duration longest)
      : shortest_(shortest.count()), longest_(longest.count()), current_(longest.count()) {}
  Clock::duration current() const {
    return Clock::duration(current_.load(std::memory_order_relaxed));
  }
  // After a poll that outlasted its first looks.
  void update(bool met) {
    const Clock::rep current = current_.load(std::memory_order_relaxed);
    if (!met) {
      current_.store(current / 2 > shortest_ ? current / 2 : shortest_, std::memory_order_relaxed);
      metInRow_.store(0, std::memory_order_relaxed);
    } else if (metInRow_.fetch_add(1, std::memory_order_relaxed) + 1 >= kMetToGrow) {
      metInRow_.store(0, std::memory_order_relaxed);
      current_.store(2 * current < longest_ ? 2 * current : longest_, std::memory_order_relaxed);
    }
  }

 private:
  const Clock::rep shortest_, longest_;
  std::atomic<Clock::rep> current_;
  std::atomic<uint32_t> metInRow_{0};
};

// The busy phase of a wait, before it sleeps: how long it polls (GYRE_SPIN_US, or `budget`
// where set) and whether it yields the core between polls (ranks outnumber cores: the rank
// waited for may need this one). Where each rank has a core it polls back to back: yielding
// hands the core to any other runnable thread for a whole time slice, and sleeping makes the
// peer's wake-up an interrupt to an idle CPU (docs/perf/placement.md, "the slow mode").
struct BusyPhase {
  Clock::duration spin{};
  bool yield = false;
  SpinBudget* budget = nullptr;  // adapts `spin` (polling back to back only)
};

// Polls `ready` until it holds (true) or the busy phase has passed (false).
template <class Ready>
bool pollFor(const BusyPhase& busy, Ready&& ready) {
  SpinBudget* const budget = busy.yield ? nullptr : busy.budget;
  const Clock::duration spin = budget ? budget->current() : busy.spin;
  if (spin <= Clock::duration::zero()) return false;
  Clock::time_point end{};
  bool met = false;
  while (true) {
    // The clock only after 64 polls: a tiny call's wait is a few polls long.
    for (int i = 0; i < 64; ++i) {
      if (ready()) {
        met = true;
        break;
      }
      if (busy.yield) {
        sched_yield();
      } else {
        cpuRelax();
      }
    }
    if (met) break;
    const auto now = Clock::now();
    if (end == Clock::time_point{}) end = now + spin;
    if (now >= end) break;
  }
  if (budget && end != Clock::time_point{}) budget->update(met);
  return met;
}

}  // namespace gyre
