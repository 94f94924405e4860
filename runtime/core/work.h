// A handle on asynchronous work: done or not, and how it ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "base/status.h"

namespace gyre {

class CallQueue;

class Work {
 public:
  // `queue`: where the work waits to run, which a waiter may help along (CallQueue::help).
  explicit Work(std::weak_ptr<CallQueue> queue = {}) : queue_(std::move(queue)) {}
  // True once the work finished, successfully or not.
  bool test() const;
  // Waits up to `timeout`; Code::timeout (the work goes on) if it has not finished by then,
  // else how it ended. `mayRun`: a wait with time to spare may run the work, and the calls
  // queued before it, on the waiting thread (CallQueue); it then returns when they end.
  Status wait(std::chrono::milliseconds timeout, bool mayRun = true) const;
  // Runs `fn` once the work has run, just before waits see it finished: on the thread that
  // ran it, or here at once when it has run already. At most one per work (gyreWorkOnEnd
  // refuses a second).
  void onEnd(std::function<void()> fn);
  // Called once by the thread that ran the work.
  void finish(Status status);

 private:
  std::function<void()> onEnd_;
  bool ending_ = false;  // finish() took onEnd_: a later one runs at once
  std::weak_ptr<CallQueue> queue_;
  mutable std::mutex mutex_;
  mutable std::condition_variable done_;
  bool finished_ = false;
  Status status_;
};

}  // namespace gyre
