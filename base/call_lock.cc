#include "base/call_lock.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace gyre {

void CallLock::lockContended() {
  using std::chrono::microseconds;
  auto pause = microseconds(1);
  for (int tries = 0;; ++tries) {
    if (try_lock()) return;
    if (tries < 64) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(2 * pause, microseconds(100));
    }
  }
}

}  // namespace gyre
