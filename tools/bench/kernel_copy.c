// A copy through the kernel (process_vm_readv, what the shm single copy and the direct-read
// collectives use) against a memcpy of the same bytes, on one core: the fastest of 50 each,
// GB/s, 64 KiB to 16 MiB. The tuner's prices for the two were fitted on one host
// (docs/tuning.md); this shows how far another host's ratio lies from them. An argument puts
// buffers on transparent huge pages first (MADV_HUGEPAGE): `from` the one the kernel pins page
// by page (a peer's buffer in gyre's direct reads), `to` the one it copies into, `both`.
//   cc -O2 -o /tmp/kernel_copy tools/bench/kernel_copy.c && /tmp/kernel_copy [from|to|both]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  const char* huge = argc > 1 ? argv[1] : "";
  if (*huge && strcmp(huge, "from") && strcmp(huge, "to") && strcmp(huge, "both")) {
    fprintf(stderr, "usage: %s [from|to|both]\n", argv[0]);
    return 2;
  }
  for (size_t bytes = 64 << 10; bytes <= (16 << 20); bytes *= 4) {
    // Huge pages need 2 MiB alignment; smaller buffers stay on small pages either way.
    const size_t align = bytes >= (2 << 20) ? (2 << 20) : 4096;
    char* from = aligned_alloc(align, bytes);
    char* to = aligned_alloc(align, bytes);
    if (!from || !to) return 1;
    if ((!strcmp(huge, "from") || !strcmp(huge, "both")) && madvise(from, bytes, MADV_HUGEPAGE))
      perror("madvise");
    if ((!strcmp(huge, "to") || !strcmp(huge, "both")) && madvise(to, bytes, MADV_HUGEPAGE))
      perror("madvise");
    memset(from, 1, bytes);
    memset(to, 2, bytes);
    double bestCopy = 1e18, bestKernel = 1e18;
    for (int i = 0; i < 50; i++) {
      const double t0 = nowNs();
      memcpy(to, from, bytes);
      const double t1 = nowNs();
      struct iovec local = {to, bytes}, remote = {from, bytes};
      if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)bytes) {
        perror("process_vm_readv");
        return 1;
      }
      const double t2 = nowNs();
      if (t1 - t0 < bestCopy) bestCopy = t1 - t0;
      if (t2 - t1 < bestKernel) bestKernel = t2 - t1;
    }
    printf("%6zu KiB  memcpy %6.1f GB/s  kernel %5.1f GB/s  kernel/memcpy time %.2f\n", bytes >> 10,
           bytes / bestCopy, bytes / bestKernel, bestKernel / bestCopy);
    free(from);
    free(to);
  }
  return 0;
}
