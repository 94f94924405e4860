/* How long one cache line takes to go from one CPU to another and back, twice a second:
 * two threads pinned to two CPUs bounce a counter, and each half second prints the mean
 * round trip. Where a virtual machine's CPUs move between host cores, this moves with it.
 * Build and run: cc -O2 -pthread tools/bench/line_pingpong.c -o pingpong && ./pingpong [CPU_A CPU_B
 * [SECONDS]] */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) atomic_long ball;
static atomic_int stop;

static void* partner(void* arg) {
  pin(*(int*)arg);
  for (long seen = 1; !atomic_load(&stop); seen += 2) {
    while (atomic_load_explicit(&ball, memory_order_acquire) != seen && !atomic_load(&stop)) {
    }
    atomic_store_explicit(&ball, seen + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
  double seconds = argc > 3 ? atof(argv[3]) : 10;
  pthread_t t;
  pthread_create(&t, NULL, partner, &b);
  pin(a);
  long next = 0;
  for (double start = nowSeconds(), end = start + seconds; nowSeconds() < end;) {
    const double t0 = nowSeconds();
    long trips = 0;
    while (nowSeconds() - t0 < 0.5) {
      for (int i = 0; i < 1000; ++i, next += 2, ++trips) {
        atomic_store_explicit(&ball, next + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != next + 2) {
        }
      }
    }
    printf("%.1f s: %.0f ns per round trip\n", nowSeconds() - start, (nowSeconds() - t0) * 1e9 / trips);
    fflush(stdout);
  }
  atomic_store(&stop, 1);
  atomic_fetch_add(&ball, 1);
  pthread_join(t, NULL);
  return 0;
}
