// The set-up socket that connections whose bytes move elsewhere (shm, rdma) keep open and
// silent: its end-of-file is how a side learns the other is gone, and a failing side's last
// words on it say why. It also records the connection's first failure, which every later wait
// reports.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.h"

namespace gyre {

class SetupSocket {
 public:
  // `fd`: the connected socket, owned from now on. `goneText` starts the failure recorded when
  // the peer's end closes ("rank 1: rank 0 failed over shm: "). `onFail` runs after a failure
  // is recorded (to wake sleepers).
  // `peer` becomes the failure's lostRank when its end closes.
  SetupSocket(int fd, std::string goneText, int peer, std::function<void()> onFail = {});
  ~SetupSocket();
  SetupSocket(const SetupSocket&) = delete;
  SetupSocket& operator=(const SetupSocket&) = delete;

  int fd() const { return fd_; }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records `status` unless a failure is recorded already.
  void fail(Status status) const;
  // The recorded failure. With none, one recv() peek at most every 5 ms (at once after
  // lookNow()) records the peer's departure once its end has closed or spoken.
  Status failure() const;
  void lookNow() const { nextCheck_.store(0, std::memory_order_relaxed); }
  // Shuts the socket down, so the peer's failure() sees it; false when it already was. With a
  // `cause`, it is sent first: the peer's failure() then reports it as this rank's.
  bool shutdown(const Status* cause = nullptr);

 private:
  const int fd_;
  const std::string goneText_;
  const int peer_;
  const std::function<void()> onFail_;
  std::atomic<bool> shut_{false};
  mutable std::atomic<bool> failed_{false};
  mutable std::atomic<int64_t> nextCheck_{0};  // steady-clock ns of the next peek
  mutable std::mutex mutex_;
  mutable Status failure_;
};

}  // namespace gyre
