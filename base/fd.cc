#include "base/fd.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace gyre {

void setCloseOnExec(int fd) {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

void setTcpLiveness(int fd, std::chrono::milliseconds deadAfter) {
  if (fd < 0 || deadAfter.count() <= 0) return;
  const int deadSeconds = int(std::max<long long>(1, deadAfter.count() / 1000));
  // Idle a third of the time, then a probe a second until the time is up.
  const int idle = std::max(1, deadSeconds / 3);
  const int interval = 1;
  const int probes = std::max(1, deadSeconds - idle);
  const int on = 1;
  const unsigned userTimeout = unsigned(deadAfter.count());
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeout, sizeof userTimeout);
}

}  // namespace gyre
