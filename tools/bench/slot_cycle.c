// Does a payload's pace between two CPUs depend on how much memory the payloads cycle through?
// Two threads pinned to CPUs 0 and 1 swap payloads of BYTES through rings of SLOTS slots, one
// ring per direction, as two ranks' links do in an all-reduce: each thread copies its payload
// into the next slot of its ring, publishes it, waits for the other's, and copies that out.
// A slot is written again SLOTS swaps later; the rings cycle SLOTS x STRIDE bytes each
// (docs/tuning.md, "Spreading payloads"). Prints the fastest of five runs, in us per swap.
//   cc -O2 -pthread -o /tmp/slot_cycle tools/bench/slot_cycle.c
//   for slots in 4 8 16 32; do /tmp/slot_cycle 65536 $slots; done
// Usage: slot_cycle BYTES SLOTS [STRIDE (default BYTES)]
#include "probe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t bytes, stride, slots;
static long swaps;
static char *ring[2], *src[2], *dst[2];
static _Atomic long published[2];

static void* side(void* arg) {
  const int me = (int)(long)arg, other = 1 - me;
  pin(me);
  for (long i = 0; i < swaps; ++i) {
    memcpy(ring[me] + (size_t)i % slots * stride, src[me], bytes);
    atomic_store_explicit(&published[me], i + 1, memory_order_release);
    while (atomic_load_explicit(&published[other], memory_order_acquire) <= i) {
    }
    memcpy(dst[me], ring[other] + (size_t)i % slots * stride, bytes);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s BYTES SLOTS [STRIDE]\n", argv[0]);
    return 2;
  }
  bytes = (size_t)atol(argv[1]);
  slots = (size_t)atol(argv[2]);
  stride = argc > 3 ? (size_t)atol(argv[3]) : bytes;
  if (bytes == 0 || slots == 0 || stride < bytes) {
    fprintf(stderr, "BYTES and SLOTS must be positive, STRIDE at least BYTES\n");
    return 2;
  }
  swaps = 3000;
  for (int k = 0; k < 2; ++k) {
    ring[k] = aligned_alloc(4096, (slots * stride + 4095) / 4096 * 4096);
    src[k] = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    dst[k] = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!ring[k] || !src[k] || !dst[k]) return 1;
    memset(ring[k], 1, slots * stride);
    memset(src[k], 2, bytes);
    memset(dst[k], 3, bytes);
  }
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    published[0] = published[1] = 0;
    pthread_t threads[2];
    const double start = nowSeconds();
    for (long k = 0; k < 2; ++k) pthread_create(&threads[k], NULL, side, (void*)k);
    for (int k = 0; k < 2; ++k) pthread_join(threads[k], NULL);
    const double us = (nowSeconds() - start) / (double)swaps * 1e6;
    if (us < best) best = us;
  }
  printf("%zu bytes, %zu slots %zu apart (%zu KiB cycled): %.2f us per swap\n", bytes, slots,
         stride, slots * stride >> 10, best);
  return 0;
}
