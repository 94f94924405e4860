// A handle on asynchronous work: done or not, and how it ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/status.h"

namespace gyre {

class Work {
 public:
  // True once the work finished, successfully or not.
  bool test() const;
  // Waits up to `timeout`; Code::timeout (the work goes on) if it has not finished by then,
  // else how it ended.
  Status wait(std::chrono::milliseconds timeout) const;
  // Called once by the worker.
  void finish(Status status);

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable done_;
  bool finished_ = false;
  Status status_;
};

}  // namespace gyre
