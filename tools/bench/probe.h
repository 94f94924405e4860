/* What the C probes of tools/bench share: pinning the calling thread to one CPU, a monotonic
 * clock, and (with AVX2) a copy whose stores stream past the writer's caches, as gyre's slots
 * are filled far apart. Header-only, so each probe still builds from its own file:
 * cc -O2 [-mavx2] -pthread tools/bench/PROBE.c */
#pragma once

#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <time.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

static inline void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static inline double nowSeconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#ifdef __AVX2__
/* `bytes` a multiple of 64, both ends 32-byte aligned. */
static inline void streamCopy(char* to, const char* from, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) {
    const __m256i a = _mm256_load_si256((const __m256i*)(from + i));
    const __m256i b = _mm256_load_si256((const __m256i*)(from + i + 32));
    _mm256_stream_si256((__m256i*)(to + i), a);
    _mm256_stream_si256((__m256i*)(to + i + 32), b);
  }
  _mm_sfence();  // the stores are visible before the flag that publishes them
}
#endif
