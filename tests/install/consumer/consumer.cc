// Uses only the installed headers and library: all-reduce of rank+1 across the job.
#include <gyre/gyre.hpp>

#include <cstdio>

int main() {
  auto comm = gyre::Comm::fromEnv();
  const int n = comm.size();
  int64_t mine = comm.rank() + 1, total = 0;
  comm.allReduce(&mine, &total, 1);
  const bool ok = total == int64_t(n) * (n + 1) / 2;
  std::printf("consumer rank %d of %d: %s\n", comm.rank(), n, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
