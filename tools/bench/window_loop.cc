// The host window's calls alone (algorithms/oneshot.h), without the communicator around them:
// two threads pinned to CPUs 0 and 1 run OneShot::run over a window in memory, calls back to
// back, and print the time a call on each. Beside `gyre-bench` (the whole path through the C API)
// in launches alternated while the placement probe finds the CPUs far apart or close, it tells
// what the window costs and what the layers above it add (docs/perf/small_calls.md). STORES0 and
// STORES1 add that many stores to private memory after each call of rank 0 and rank 1, standing
// for the stores of the layers above the window (a call path's stack frames and copies). FAR 1
// runs the window as where the placement probe finds the CPUs far apart (streamed blocks, the
// next post taken for writing at the end of each call: OneShot::prefetchFarApart).
//   gyre-window-loop gather|reduce|broadcast|all_reduce|all_gather [BYTES=64] [CALLS=1000000]
//                    [STORES0=0] [STORES1=0] [FAR=0]
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/oneshot.h"
#include "base/wait.h"
#include "link/mailbox.h"

namespace {

using namespace gyre;

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

bool collectiveNamed(const std::string& name, Collective& coll) {
  const std::pair<const char*, Collective> known[] = {
      {"gather", Collective::gather},         {"reduce", Collective::reduce},
      {"broadcast", Collective::broadcast},   {"all_reduce", Collective::all_reduce},
      {"all_gather", Collective::all_gather},
  };
  for (const auto& [n, c] : known) {
    if (name == n) {
      coll = c;
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Collective coll{};
  if (argc < 2 || !collectiveNamed(argv[1], coll)) {
    std::fprintf(stderr,
                 "usage: gyre-window-loop gather|reduce|broadcast|all_reduce|all_gather "
                 "[BYTES=64] [CALLS=1000000] [STORES0=0] [STORES1=0] [FAR=0]\n");
    return 2;
  }
  const size_t bytes = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 64;
  const long calls = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 1000000;
  constexpr int kMaxStores = 4096;
  const int extraStores[2] = {argc > 4 ? std::atoi(argv[4]) : 0, argc > 5 ? std::atoi(argv[5]) : 0};
  const bool farApart = argc > 6 && std::atoi(argv[6]) != 0;
  if (calls <= 0 || extraStores[0] < 0 || extraStores[1] < 0 || extraStores[0] > kMaxStores ||
      extraStores[1] > kMaxStores) {
    std::fprintf(stderr, "gyre-window-loop: CALLS must be positive, STORES0 and STORES1 0-%d\n",
                 kMaxStores);
    return 2;
  }
  const size_t count = std::max<size_t>(1, bytes / 4);  // floats (per rank for a gather)
  constexpr int n = 2;
  constexpr size_t kCapacity = 65536;  // GYRE_ONESHOT_BYTES's default
  const size_t windowBytes = MailboxWindow::bytesFor(n, kCapacity);
  void* base =
      mmap(nullptr, windowBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  const MailboxWindow windows[n] = {MailboxWindow(base, n, kCapacity, true),
                                    MailboxWindow(base, n, kCapacity, false)};
  double usPerCall[n] = {};
  // Each rank's stores go to lines of its own, through a volatile pointer: every one is made.
  static long storeSink[n][kMaxStores + 8];
  auto rank = [&](int r) {
    pinTo(r);
    OneShot window(windows[r], r);
    if (registerSleeperBarriers()) window.useSleeperBarriers();
    window.streamBlocks(farApart);
    window.prefetchFarApart(farApart);
    std::vector<float> in(count * n, float(r + 1)), out(count * n, 0);
    OpContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.timeout = std::chrono::seconds(10);
    ctx.busy.spin = std::chrono::milliseconds(50);
    ctx.desc = {0, count, 0, coll, DataType::f32, RedOp::sum};
    for (int round = 0; round < 2; ++round) {  // the first warms up
      const auto start = std::chrono::steady_clock::now();
      ctx.deadline = start + std::chrono::seconds(60);
      for (long k = 0; k < calls; ++k) {
        ++ctx.desc.seq;
        window.run(ctx, in.data(), out.data());
        volatile long* sink = storeSink[r];
        for (int s = 0; s < extraStores[r]; ++s) sink[s] = k;
      }
      usPerCall[r] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
          double(calls) * 1e6;
    }
  };
  // Each rank on a thread of its own; a failure (a wait past its deadline) ends the program
  // with its message instead of terminating a thread.
  std::exception_ptr failed[n];
  std::thread threads[n];
  for (int r = 0; r < n; ++r) {
    threads[r] = std::thread([&, r] {
      try {
        rank(r);
      } catch (...) {
        failed[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& f : failed) {
    if (!f) continue;
    try {
      std::rethrow_exception(f);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gyre-window-loop: %s\n", e.what());
      return 1;
    }
  }
  std::printf("%s of %zu B at n = 2, the window alone: %.3f us a call on rank 0, %.3f on rank 1",
              argv[1], count * 4, usPerCall[0], usPerCall[1]);
  if (extraStores[0] || extraStores[1]) {
    std::printf(" (%d and %d more stores a call)", extraStores[0], extraStores[1]);
  }
  if (farApart) std::printf(", run as far apart");
  std::printf("\n");
  return 0;
}
