// Does a slot's pace depend on where the CPUs sit, and do non-temporal stores change that?
// A producer on CPU 0 copies 64 MiB in 64 KiB pieces into a ring of 8 slots, a consumer on
// CPU 1 copies each slot out, as a shared-memory link's two ends do. Each round times the
// producer's fill with memcpy and with AVX2 streaming stores (twice each, alternated). Where the
// CPUs sit, run the placement probe around it (docs/perf/run_to_run.md, "Launches as long as the
// peers'"):
//   cc -O2 -mavx2 -pthread -o /tmp/slot_stores tools/bench/slot_stores.c
//   . tools/bench/placement.sh && placement_build /tmp
//   for i in $(seq 30); do echo "$(round_trip) $(/tmp/slot_stores 1) $(round_trip)"; done
// Usage: slot_stores [ROUNDS]
#include "probe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSlot = 64 << 10, kSlots = 8, kBuffer = 16 << 20 };
static const long kTotal = 64L << 20;
static char *ring, *src, *dst;
static _Atomic long published, consumed;

static void* consume(void* unused) {
  (void)unused;
  pin(1);
  for (long piece = 0; piece < kTotal / kSlot; ++piece) {
    while (atomic_load_explicit(&published, memory_order_acquire) <= piece) {
    }
    memcpy(dst + piece * kSlot % kBuffer, ring + piece % kSlots * kSlot, kSlot);
    atomic_store_explicit(&consumed, piece + 1, memory_order_release);
  }
  return NULL;
}

static double gbPerSecond(int streaming) {
  published = consumed = 0;
  pthread_t consumer;
  pthread_create(&consumer, NULL, consume, NULL);
  const double start = nowSeconds();
  for (long piece = 0; piece < kTotal / kSlot; ++piece) {
    while (piece - atomic_load_explicit(&consumed, memory_order_acquire) >= kSlots) {
    }
    char* slot = ring + piece % kSlots * kSlot;
    const char* from = src + piece * kSlot % kBuffer;
    if (streaming) {
      streamCopy(slot, from, kSlot);
    } else {
      memcpy(slot, from, kSlot);
    }
    atomic_store_explicit(&published, piece + 1, memory_order_release);
  }
  pthread_join(consumer, NULL);
  return kTotal / (nowSeconds() - start) / 1e9;
}

int main(int argc, char** argv) {
  pin(0);
  ring = aligned_alloc(4096, kSlot * kSlots);
  src = aligned_alloc(4096, kBuffer);
  dst = aligned_alloc(4096, kBuffer);
  memset(src, 1, kBuffer);
  memset(dst, 2, kBuffer);
  memset(ring, 0, kSlot * kSlots);
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  for (int r = 0; r < rounds; ++r) {
    const double copy1 = gbPerSecond(0), stream1 = gbPerSecond(1);
    const double copy2 = gbPerSecond(0), stream2 = gbPerSecond(1);
    printf("memcpy %5.2f %5.2f streaming %5.2f %5.2f GB/s\n", copy1, copy2, stream1, stream2);
    fflush(stdout);
  }
  return 0;
}
