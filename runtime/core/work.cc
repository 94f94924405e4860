#include "runtime/core/work.h"

#include <string>

namespace gyre {

bool Work::test() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

Status Work::wait(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  if (!done_.wait_for(lock, timeout, [&] { return finished_; })) {
    return {Code::timeout, "work not finished after " + std::to_string(timeout.count()) +
                               " ms (it continues; wait again or abort the communicator)"};
  }
  return status_;
}

void Work::finish(Status status) {
  {
    std::lock_guard lock(mutex_);
    status_ = std::move(status);
    finished_ = true;
  }
  done_.notify_all();
}

}  // namespace gyre
