// What a store costs to a line another CPU has just read, and whether preparing the line
// beforehand takes that away: a host window's poster writes each post into a line its reader
// read a lap before (docs/perf/small_calls.md). CPU 1 reads line i, then CPU 0 prepares it
// (MODE 0: nothing; 1: PREFETCHW; 2: a prefetch for reading; 3: a store into the line's last
// byte), waits 2 µs, and times a store to the line and the fence after it. Prints cycles of
// the CPU's time-stamp counter per store and fence; a store into an owned line takes a fence's
// time alone. Built as build/tools/gyre-probe-store_after_read (x86 only); run it with the
// placement probe around it:
//   for m in 0 1 2 3; do build/tools/gyre-probe-store_after_read $m; done
// Usage: store_after_read MODE(0-3) [ROUNDS=100000]
#include "probe.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

enum { kLines = 256 };

static char lines[kLines][64] __attribute__((aligned(64)));
// i + 1: CPU 1 may read line i; -(i + 1): it has.
static _Atomic long turn __attribute__((aligned(64)));
static long rounds;

static void* reader(void* sumOut) {
  pin(1);
  long sum = 0;
  for (long i = 0; i < rounds; ++i) {
    while (atomic_load(&turn) != i + 1) {
    }
    sum += lines[i % kLines][0];
    atomic_store(&turn, -(i + 1));
  }
  *(long*)sumOut = sum;
  return NULL;
}

static void spinFor(double seconds) {
  const double until = nowSeconds() + seconds;
  while (nowSeconds() < until) {
  }
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : -1;
  rounds = argc > 2 ? atol(argv[2]) : 100000;
  if (mode < 0 || mode > 3 || rounds < 1) {
    fprintf(stderr,
            "usage: store_after_read MODE(0 none, 1 PREFETCHW, 2 read prefetch, "
            "3 store) [ROUNDS=100000]\n");
    return 2;
  }
  long sum = 0, want = 0;
  pthread_t r;
  pthread_create(&r, NULL, reader, &sum);
  pin(0);
  unsigned long long cycles = 0;
  for (long i = 0; i < rounds; ++i) {
    char* line = lines[i % kLines];
    atomic_store(&turn, i + 1);
    while (atomic_load(&turn) != -(i + 1)) {
    }
    want += line[0];
    if (mode == 1) __asm__ volatile("prefetchw %0" : : "m"(*line));
    if (mode == 2) __builtin_prefetch(line, 0);
    if (mode == 3) atomic_store_explicit((_Atomic char*)(line + 63), 0, memory_order_relaxed);
    spinFor(2e-6);
    _mm_mfence();
    const unsigned long long start = __rdtsc();
    line[0] = (char)(i + 1);
    _mm_mfence();
    cycles += __rdtsc() - start;
  }
  pthread_join(r, NULL);
  if (sum != want) {
    fprintf(stderr, "store_after_read: the reader saw %ld where %ld was written\n", sum, want);
    return 1;
  }
  const char* names[] = {"nothing", "PREFETCHW", "a read prefetch", "a store"};
  printf("after %s 2 us before: %.0f cycles a store and fence\n", names[mode],
         (double)cycles / (double)rounds);
  return 0;
}
