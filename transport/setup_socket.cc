#include "transport/setup_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "base/wait.h"

namespace gyre {

SetupSocket::SetupSocket(int fd, std::string goneText, int peer, std::function<void()> onFail)
    : fd_(fd), goneText_(std::move(goneText)), peer_(peer), onFail_(std::move(onFail)) {}

SetupSocket::~SetupSocket() {
  ::close(fd_);
}

void SetupSocket::fail(Status status) const {
  {
    std::lock_guard lock(mutex_);
    if (failure_.ok()) failure_ = std::move(status);
  }
  failed_.store(true, std::memory_order_seq_cst);
  if (onFail_) onFail_();
}

Status SetupSocket::failure() const {
  if (!failed()) {
    constexpr auto kInterval = std::chrono::milliseconds(5);
    const int64_t now = Clock::now().time_since_epoch().count();
    int64_t due = nextCheck_.load(std::memory_order_relaxed);
    if (now < due || !nextCheck_.compare_exchange_strong(
                         due, now + std::chrono::nanoseconds(kInterval).count())) {
      return {};
    }
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return {};
    fail({Code::remote_error,
          goneText_ + (n == 0  ? "its end of the connection closed (it exited or failed)"
                       : n > 0 ? "it sent unexpected bytes"
                               : errnoText(errno)),
          peer_});
  }
  std::lock_guard lock(mutex_);
  return failure_;
}

bool SetupSocket::shutdown() {
  if (shut_.exchange(true)) return false;
  ::shutdown(fd_, SHUT_RDWR);
  return true;
}

}  // namespace gyre
