// File descriptors gyre opens must not outlive it in the processes a rank starts: a data
// loader or shell-out that inherited a rank's socket keeps it open after the rank dies, and
// its peers then wait out their timeout instead of seeing the connection close.
#pragma once

namespace gyre {

// Sets FD_CLOEXEC on `fd`; a negative fd is ignored.
void setCloseOnExec(int fd);

}  // namespace gyre
