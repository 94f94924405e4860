// Why a spread payload's first time round is slower: two processes on CPUs 0 and 1 share a
// region of PLACES x BYTES (tmpfs, MAP_POPULATE, as gyre's window and slots), the writer copies
// a payload into place i % PLACES and publishes it, the reader copies it out and acknowledges
// (the writer one call ahead at most), as a two-rank broadcast through spread places
// (link/slot.h: spreadOffset). Prints the mean us per call of each of four rounds of PLACES
// calls. Before the calls each side may first touch the region (MODE letters):
//   w  the writer stores one byte to each page      r  the reader loads one byte from each page
//   c  the writer stores to every line, then the reader loads every line
//   s  each side then sweeps 256 MiB of its own memory (a working set between calls)
//   n  nothing
// Built as build/tools/gyre-probe-first_round:
//   for m in n w r wr wrs c; do build/tools/gyre-probe-first_round 32768 32 $m; done
// Usage: first_round BYTES PLACES MODE [DIR]: DIR the tmpfs (default /dev/shm; one mounted with
// huge=always puts the region in 2 MiB pages).
#include "probe.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kRounds = 4 };

static void touchPages(char* at, size_t bytes, int store) {
  static volatile char sink;
  for (size_t o = 0; o < bytes; o += 4096) {
    if (store) {
      at[o] = 0;
    } else {
      sink += at[o];
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: first_round BYTES PLACES MODE (n, w, r, c, s) [DIR]\n");
    return 2;
  }
  const size_t bytes = strtoul(argv[1], NULL, 10), places = strtoul(argv[2], NULL, 10);
  const char* mode = argv[3];
  const size_t region = bytes * places;
  if (bytes == 0 || places == 0) return 2;
  const char* dir = argc == 5 ? argv[4] : "/dev/shm";
  const int fd = open(dir, O_TMPFILE | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)(region + 4096)) != 0) {
    perror(dir);
    return 1;
  }
  char* base = mmap(NULL, region + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  _Atomic long* published = (_Atomic long*)(base + region);
  _Atomic long* acknowledged = (_Atomic long*)(base + region + 64);
  _Atomic long* arrived = (_Atomic long*)(base + region + 128);
  const pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  const int writer = child != 0;
  pin(writer ? 0 : 1);
  char* own = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  memset(own, writer, bytes);
  if (strchr(mode, 'w') && writer) touchPages(base, region, 1);
  if (strchr(mode, 'r') && !writer) touchPages(base, region, 0);
  if (strchr(mode, 'c') && writer) memset(base, 0, region);
  atomic_fetch_add(arrived, 1);
  while (atomic_load(arrived) < 2) {
  }
  if (strchr(mode, 'c') && !writer) {
    static volatile char sink;
    for (size_t o = 0; o < region; o += 64) sink += base[o];
  }
  if (strchr(mode, 's')) {
    const size_t sweep = (size_t)256 << 20;
    char* other = malloc(sweep);
    if (other) {
      touchPages(other, sweep, 1);
      touchPages(other, sweep, 0);
      free(other);
    }
  }
  atomic_fetch_add(arrived, 1);
  while (atomic_load(arrived) < 4) {
  }
  const long calls = kRounds * (long)places;
  double* started = calloc((size_t)calls + 1, sizeof(double));
  for (long i = 0; i < calls; ++i) {
    started[i] = nowSeconds();
    char* at = base + (size_t)i % places * bytes;
    if (writer) {
      while (atomic_load_explicit(acknowledged, memory_order_acquire) < i - 1) {
      }
      memcpy(at, own, bytes);
      atomic_store_explicit(published, i + 1, memory_order_release);
    } else {
      while (atomic_load_explicit(published, memory_order_acquire) <= i) {
      }
      memcpy(own, at, bytes);
      atomic_store_explicit(acknowledged, i + 1, memory_order_release);
    }
  }
  started[calls] = nowSeconds();
  if (writer) {
    waitpid(child, NULL, 0);
    return 0;
  }
  printf("%-4s", mode);
  for (int r = 0; r < kRounds; ++r) {
    const double us = (started[(size_t)(r + 1) * places] - started[(size_t)r * places]) * 1e6;
    printf(" round %d %.2f", r, us / (double)places);
  }
  printf("  (us a call, %zu B x %zu places)\n", bytes, places);
  return 0;
}
