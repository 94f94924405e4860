// File descriptors gyre opens must not outlive it in the processes a rank starts: a data
// loader or shell-out that inherited a rank's socket keeps it open after the rank dies, and
// its peers then wait out their timeout instead of seeing the connection close.
#pragma once

#include <chrono>

namespace gyre {

// Sets FD_CLOEXEC on `fd`; a negative fd is ignored.
void setCloseOnExec(int fd);

// A tcp peer whose kernel answers nothing for `deadAfter` (a pulled cable, a host that lost
// power) makes the socket fail with ETIMEDOUT, idle or not: keepalive probes on an idle
// connection, TCP_USER_TIMEOUT on unacknowledged data. A peer that is alive but not reading
// still acknowledges, so a long computation never trips it. Zero leaves the system's
// defaults (minutes). Best effort: a socket option this kernel lacks is skipped.
void setTcpLiveness(int fd, std::chrono::milliseconds deadAfter);

}  // namespace gyre
