#include "transport/setup_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/wait.h"

namespace gyre {

namespace {

// A failing side's last words: "GYREFAIL <code> <lostRank>\n<message>", at most kMaxCause.
constexpr char kCauseTag[] = "GYREFAIL ";
constexpr size_t kMaxCause = 2048;

std::string encodeCause(const Status& s) {
  std::string text =
      kCauseTag + std::to_string(int(s.code)) + " " + std::to_string(s.lostRank) + "\n" + s.message;
  if (text.size() > kMaxCause) text.resize(kMaxCause);
  return text;
}

// The peer's cause, if `text` is one.
bool decodeCause(const std::string& text, int& code, int& lostRank, std::string& message) {
  if (text.compare(0, sizeof kCauseTag - 1, kCauseTag) != 0) return false;
  const size_t eol = text.find('\n');
  if (eol == std::string::npos) return false;
  if (std::sscanf(text.c_str() + sizeof kCauseTag - 1, "%d %d", &code, &lostRank) != 2) {
    return false;
  }
  message = text.substr(eol + 1);
  return code > 0 && code <= int(Code::internal) && lostRank >= -1;
}

}  // namespace

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
    char bytes[kMaxCause];
    const ssize_t n = ::recv(fd_, bytes, sizeof bytes, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return {};
    int code = 0, lostRank = -1;
    std::string cause;
    if (n > 0 && decodeCause(std::string(bytes, size_t(n)), code, lostRank, cause)) {
      // The peer failed first and said why: its cause, and the rank it lost.
      fail({Code(code), goneText_ + "it failed: " + cause, lostRank >= 0 ? lostRank : peer_});
      std::lock_guard lock(mutex_);
      return failure_;
    }
    fail({Code::remote_error,
          goneText_ + (n == 0  ? "its end of the connection closed (it exited or failed)"
                       : n > 0 ? "it sent unexpected bytes"
                               : errnoText(errno)),
          peer_});
  }
  std::lock_guard lock(mutex_);
  return failure_;
}

bool SetupSocket::shutdown(const Status* cause) {
  if (shut_.exchange(true)) return false;
  if (cause && !cause->ok()) {
    // Best effort and never blocking: the socket's buffer is empty, the text small.
    const std::string text = encodeCause(*cause);
    (void)!::send(fd_, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  ::shutdown(fd_, SHUT_RDWR);
  return true;
}

}  // namespace gyre
