#include "base/call_lock.h"

#include <chrono>

namespace gyre {

void CallLock::lockContended() {
  // No deadline of its own: the holder's call has one. Slices only bound a lost wake-up
  // where a sleeper's barrier failed (base/wait.cc).
  while (held_.exchange(1, std::memory_order_acquire) != 0) {
    sleepWhileEqual(held_, sleepers_, 1, Clock::now() + std::chrono::milliseconds(20), order_);
  }
}

}  // namespace gyre
