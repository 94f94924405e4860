#include "runtime/core/work.h"

#include <string>
#include <utility>

#include "runtime/core/call_queue.h"

namespace gyre {

bool Work::test() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

Status Work::wait(std::chrono::milliseconds timeout, bool mayRun) const {
  const auto deadline = CallQueue::Clock::now() + timeout;
  if (mayRun && timeout.count() > 0 && !test()) {
    // The queue outlives its communicator's calls only while someone holds it.
    if (auto queue = queue_.lock()) queue->help([this] { return test(); }, deadline);
  }
  std::unique_lock lock(mutex_);
  if (!done_.wait_until(lock, deadline, [&] { return finished_; })) {
    return {Code::timeout, "work not finished after " + std::to_string(timeout.count()) +
                               " ms (it continues; wait again or abort the communicator)"};
  }
  return status_;
}

void Work::onEnd(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    if (!ending_) {
      onEnd_ = std::move(fn);
      return;
    }
  }
  fn();
}

void Work::finish(Status status) {
  std::unique_lock lock(mutex_);
  ending_ = true;
  if (auto fn = std::exchange(onEnd_, nullptr)) {
    // Before the work reads finished: whoever waits for it to free what the callback uses
    // (gyreWorkFree) waits for the callback too.
    lock.unlock();
    fn();
    lock.lock();
  }
  status_ = std::move(status);
  finished_ = true;
  lock.unlock();
  done_.notify_all();
}

}  // namespace gyre
