// A stream of tiny posts from CPU 0 to CPU 1, as a rooted window call's leaf makes them for its
// root: the writer fills a 4 KiB ring of SLOT-byte posts (a 4-byte flag, the message's sequence
// number, and an 8-byte payload), then makes STORES stores to private memory (what a call's path
// stores between two posts); the reader polls each post in turn, prefetches the post four on
// where the one it wants was already there, and says how far it got every DONE_EVERY posts in a
// word the writer reads only when the ring looks full. Prints ns per post. SLOT 64 is the host
// window's layout (a post a cache line); 32 packs two posts a line, as Open MPI's shared-memory
// fast box does for messages of up to 8 B (docs/perf/small_calls.md). Built as
// build/tools/gyre-probe-post_stream; run it with the placement probe around it:
//   for s in 64 32; do for k in 0 64 150; do build/tools/gyre-probe-post_stream $s $k; done; done
// Usage: post_stream SLOT(32|64) STORES [DONE_EVERY=1] [POSTS=2000000]
#include "probe.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kRingBytes = 4096, kPrefetchAhead = 4, kMaxStores = 1024 };

static int slotBytes, stores, doneEvery;
static long posts;
static char* ring;
static _Atomic uint64_t done __attribute__((aligned(64)));
static volatile uint64_t path[kMaxStores];  // the writer's private stores

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline char* postAt(long i) {
  return ring + (i % (kRingBytes / slotBytes)) * slotBytes;
}

static void* writer(void* unused) {
  (void)unused;
  pin(0);
  const long slots = kRingBytes / slotBytes;
  uint64_t known = 0;
  for (long i = 1; i <= posts; ++i) {
    // Post i reuses the post of i - slots: the reader must be past it.
    while ((long)known < i - slots) {
      known = atomic_load_explicit(&done, memory_order_acquire);
      if ((long)known < i - slots) relax();
    }
    char* post = postAt(i);
    *(uint64_t*)(post + 8) = (uint64_t)i * 3;
    atomic_store_explicit((_Atomic uint32_t*)post, (uint32_t)i, memory_order_release);
    for (int k = 0; k < stores; ++k) path[k] = (uint64_t)i;
  }
  return NULL;
}

static void* reader(void* sumOut) {
  pin(1);
  uint64_t sum = 0;
  for (long i = 1; i <= posts; ++i) {
    char* post = postAt(i);
    _Atomic uint32_t* flag = (_Atomic uint32_t*)post;
    if (atomic_load_explicit(flag, memory_order_acquire) == (uint32_t)i) {
      __builtin_prefetch(postAt(i + kPrefetchAhead));
    }
    while (atomic_load_explicit(flag, memory_order_acquire) != (uint32_t)i) relax();
    sum += *(uint64_t*)(post + 8);
    if (i % doneEvery == 0 || i == posts) {
      atomic_store_explicit(&done, (uint64_t)i, memory_order_release);
    }
  }
  *(uint64_t*)sumOut = sum;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: post_stream SLOT(32|64) STORES [DONE_EVERY=1] [POSTS=2000000]\n");
    return 2;
  }
  slotBytes = atoi(argv[1]);
  stores = atoi(argv[2]);
  doneEvery = argc > 3 ? atoi(argv[3]) : 1;
  posts = argc > 4 ? atol(argv[4]) : 2000000;
  if ((slotBytes != 32 && slotBytes != 64) || stores < 0 || stores > kMaxStores || doneEvery < 1 ||
      doneEvery > kRingBytes / slotBytes / 2 || posts < 1) {
    fprintf(stderr, "post_stream: SLOT 32 or 64, STORES 0-%d, DONE_EVERY 1-%d, POSTS > 0\n",
            kMaxStores, kRingBytes / slotBytes / 2);
    return 2;
  }
  ring = aligned_alloc(4096, kRingBytes);
  if (!ring) return 1;
  memset(ring, 0, kRingBytes);
  uint64_t sum = 0;
  pthread_t w, r;
  const double start = nowSeconds();
  pthread_create(&r, NULL, reader, &sum);
  pthread_create(&w, NULL, writer, NULL);
  pthread_join(w, NULL);
  pthread_join(r, NULL);
  const double ns = (nowSeconds() - start) * 1e9 / (double)posts;
  const uint64_t want = 3 * (uint64_t)posts * (uint64_t)(posts + 1) / 2;
  if (sum != want) {
    fprintf(stderr, "post_stream: the reader summed %llu where %llu was posted\n",
            (unsigned long long)sum, (unsigned long long)want);
    return 1;
  }
  printf("%d B posts, %d stores a post, done every %d: %.1f ns a post\n", slotBytes, stores,
         doneEvery, ns);
  free(ring);
  return 0;
}
