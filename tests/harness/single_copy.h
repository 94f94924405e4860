// Whether this process may read memory through the kernel (process_vm_readv), which shm's
// single copy needs; the tests that count single copies skip that count, saying why, where not.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace gyre::test {

// Empty where it may, else why not.
inline std::string singleCopyMissing() {
  uint64_t from = 42, to = 0;
  iovec local{&to, sizeof to}, remote{&from, sizeof from};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(sizeof to) || to != from) {
    return std::string("process_vm_readv: ") + std::strerror(errno);
  }
  return {};
}

}  // namespace gyre::test
