// The threads that run a collective's channels beyond the first: created when a call first
// uses that many channels, then kept for the communicator's life, so a multi-channel call
// costs two futex wake-ups per helper instead of a thread start and join.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/wait.h"

namespace gyre {

class ChannelWorkers {
 public:
  ChannelWorkers() = default;
  ~ChannelWorkers();  // joins the workers; no run() may be in progress
  ChannelWorkers(const ChannelWorkers&) = delete;
  ChannelWorkers& operator=(const ChannelWorkers&) = delete;

  // Runs body(c) for every c in [0, n): c = 0 on the calling thread, the others on workers,
  // and returns when all have returned. `body` must not throw and must end by itself (every
  // channel of a collective has the call's deadline). One run() at a time.
  void run(int n, const std::function<void(int)>& body);
  // Workers started so far (tests, diagnostics).
  int started() const { return int(workers_.size()); }

 private:
  struct Worker {
    WaitWord go;  // raised once per round this worker takes part in
    std::thread thread;
  };
  void serve(Worker& self, int channel);

  std::vector<std::unique_ptr<Worker>> workers_;
  const std::function<void(int)>* body_ = nullptr;
  WaitWord finished_;  // helpers done, summed over all rounds
  std::atomic<bool> stopping_{false};
};

}  // namespace gyre
