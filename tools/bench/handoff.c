// The floor of a hand-over through shared memory: CPU 0 writes a buffer and publishes it, CPU 1
// copies it out and answers. Every shared-memory algorithm of gyre makes such hand-overs, so
// their time where the host puts the two CPUs bounds what any algorithm can do there. Prints,
// for 64 KiB, 256 KiB, 1 MiB and 4 MiB, the fastest of ROUNDS hand-overs in µs: the whole round
// (write, publish, copy out, answer), the copy out alone, and the round with the writer's stores
// streamed past its caches. Built as build/tools/gyre-probe-handoff; run it with the placement
// probe around it:
//   . tools/bench/placement.sh && placement_build /tmp
//   for i in $(seq 20); do echo "$(round_trip) $(build/tools/gyre-probe-handoff) $(round_trip)"; done
// Usage: handoff [ROUNDS]
#include "probe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kLargest = 4 << 20 };
static char *shared, *source, *target;
static size_t bytes;
static long rounds;
static _Atomic long published, answered;
static double fastestCopyOut;

static void* copyOut(void* unused) {
  (void)unused;
  pin(1);
  double fastest = 1e18;
  for (long r = 1; r <= rounds; ++r) {
    while (atomic_load_explicit(&published, memory_order_acquire) < r) {
    }
    const double start = nowSeconds();
    memcpy(target, shared, bytes);
    const double took = nowSeconds() - start;
    fastest = took < fastest ? took : fastest;
    atomic_store_explicit(&answered, r, memory_order_release);
  }
  fastestCopyOut = fastest;  // seconds
  return NULL;
}

// The fastest round in µs; the copy out's fastest lands in fastestCopyOut.
static double handOver(size_t size, int streamed) {
  bytes = size;
  published = answered = 0;
  pthread_t reader;
  pthread_create(&reader, NULL, copyOut, NULL);
  double fastest = 1e18;
  for (long r = 1; r <= rounds; ++r) {
    const double start = nowSeconds();
    if (streamed) {
      streamCopy(shared, source, size);
    } else {
      memcpy(shared, source, size);
    }
    atomic_store_explicit(&published, r, memory_order_release);
    while (atomic_load_explicit(&answered, memory_order_acquire) < r) {
    }
    const double took = nowSeconds() - start;
    fastest = took < fastest ? took : fastest;
  }
  pthread_join(reader, NULL);
  return fastest * 1e6;
}

int main(int argc, char** argv) {
  rounds = argc > 1 ? atol(argv[1]) : 200;
  pin(0);
  shared = aligned_alloc(4096, kLargest);
  source = aligned_alloc(4096, kLargest);
  target = aligned_alloc(4096, kLargest);
  memset(shared, 0, kLargest);
  memset(source, 1, kLargest);
  memset(target, 2, kLargest);
  for (size_t size = 64 << 10; size <= kLargest; size *= 4) {
    const double round = handOver(size, 0), copy = fastestCopyOut * 1e6;
    const double streamedRound = handOver(size, 1);
    printf("%zuK %.2f %.2f %.2f  ", size >> 10, round, copy, streamedRound);
  }
  printf("\n");
  return 0;
}
