// gyre-bench --soak: random verified collectives for a while, with the resident memory of the
// largest rank after the first round and at the end (a leak shows as growth).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "gyre/gyre.h"
#include "gyre/types.h"
#include "tools/bench/bench_run.h"

namespace gyre::bench {
namespace {

double residentMiB() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

}  // namespace

// Random verified collectives until `seconds` pass on rank 0, which draws every round and
// broadcasts it so all ranks agree.
int soak(gyreComm_t comm, const Options& base, double seconds, uint64_t seed) {
  Options o = base;
  int rank = 0, n = 1;
  CHECK(gyreCommUserRank(comm, &rank));
  CHECK(gyreCommCount(comm, &n));
  const size_t maxBytes = std::min<size_t>(base.maxBytes, 64 << 20);
  Run run{o, comm, rank, n, 8, {}, {}, {}};
  run.send.resize(2 * maxBytes + 64);
  run.recv.resize(2 * maxBytes + 64);
  run.expected.resize(2 * maxBytes + 64);
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  double rssStart = 0;
  uint64_t rounds = 0, wrong = 0;
  while (true) {
    // Round parameters: coll, type, op, root, in place, log-uniform bytes; -1 = stop.
    int64_t p[7] = {0, 0, 0, 0, 0, 0, 0};
    if (rank == 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      p[0] = elapsed >= seconds ? -1 : int64_t(rng() % 4);
      p[1] = int64_t(rng() % gyre::kNumDataTypes);
      p[2] = int64_t(rng() % gyre::kNumRedOps);
      p[3] = int64_t(rng() % uint64_t(n));
      p[4] = int64_t(rng() % 2);
      p[5] = int64_t(std::exp2(std::log2(double(maxBytes)) * double(rng() % 10000) / 10000.0));
    }
    CHECK(gyreBroadcast(p, p, 7, gyreInt64, 0, comm, nullptr));
    if (p[0] < 0) break;
    o.coll = Coll(p[0]);
    o.type = DataType(p[1]);
    o.op = RedOp(p[2]);
    o.root = int(p[3]);
    o.inPlace = p[4] != 0;
    run.es = gyre::dataTypeSize(o.type);
    const size_t bytes = size_t(std::max<int64_t>(1, p[5]));
    run.prepare(bytes, true);
    run.once();
    const size_t bad = run.wrong(bytes);
    if (bad && wrong < 1000) {
      std::fprintf(
          stderr,
          "rank %d: soak round %llu: %zu wrong elements (%d, %s, %s, root %d, %s, %zu bytes)\n",
          rank, (unsigned long long)rounds, bad, int(o.coll), gyre::dataTypeName(o.type),
          gyre::redOpName(o.op), o.root, o.inPlace ? "in place" : "out of place", bytes);
    }
    wrong += bad;
    if (++rounds == 1) rssStart = residentMiB();
  }
  const uint64_t totalWrong = run.sumOverRanks(wrong);
  const double rssEnd = run.maxOverRanks(residentMiB());
  rssStart = run.maxOverRanks(rssStart);
  if (rank == 0) {
    std::printf(
        "soak: %.0f s, %llu random collectives on %d ranks, %llu wrong elements, RSS of "
        "the largest rank %.1f MiB after the first round, %.1f MiB at the end\n",
        seconds, (unsigned long long)rounds, n, (unsigned long long)totalWrong, rssStart, rssEnd);
  }
  return totalWrong == 0 ? 0 : 1;
}

}  // namespace gyre::bench
