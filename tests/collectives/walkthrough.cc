// The classic torch.distributed walkthrough on gyre's C++ API, one process per rank (run it
// under gyre-run), with a premul sum; plus, for the process tests:
//   --init-all                     rank 0 then runs a job of three ranks held whole by the
//                                  process (Comm::initAll), driven from one thread
//   --shrink                       then every rank but the last sums in a communicator
//                                  without it (Comm::shrink)
// and fault scenarios:
//   --fail-rank R [--exit-code C]  rank R exits right after init; the others start a large
//                                  all-reduce and must fail naming rank R
//   --loop N                       N large all-reduces, each checked (prints its pid first)
//   --loop-count C                 C elements per all-reduce of the loop (default 1048576)
//   --loop-coll all_reduce|broadcast|all_gather
//                                  what the loop runs (broadcast from rank 0; all-gather of
//                                  C / n elements per rank): the latter two read the sender's
//                                  buffer straight over shared memory (single copy)
//   --stop-rank R --stop-after K   in the loop, rank R computes for 0.5 s after K rounds, then
//                                  stops itself (SIGSTOP)
//   --mismatch KIND                rank 1 disagrees on count|dtype|op|root|kind
//   --second-comm                  after the loop, try to create another communicator
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gyre/gyre.hpp"

namespace {
int failures = 0;
void expect_(bool ok, int rank) {
  if (!ok && failures++ < 3) std::fprintf(stderr, "rank %d: WRONG all-reduce result\n", rank);
}
void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: WRONG: %s\n", rank, what.c_str());
    ++failures;
  }
}
}  // namespace

// Rank 1 disagrees with the others on one argument of an all-reduce (or its kind); the call
// and the next one must fail.
void mismatch(gyre::Comm& comm, const std::string& kind) {
  const bool odd = comm.rank() == 1;
  std::vector<float> a(1000, 1.0f), b(1000);
  if (kind == "count") comm.allReduce(a.data(), b.data(), odd ? 999 : 1000);
  if (kind == "dtype")
    comm.allReduce(a.data(), b.data(), 500, odd ? gyreInt32 : gyreFloat32, gyreSum);
  if (kind == "op") comm.allReduce(a.data(), b.data(), 1000, odd ? gyreMax : gyreSum);
  if (kind == "root") comm.broadcast(a.data(), b.data(), 1000, odd ? 1 : 0);
  if (kind == "kind") {
    if (odd)
      comm.broadcast(a.data(), b.data(), 1000, 0);
    else
      comm.allReduce(a.data(), b.data(), 1000);
  }
  // A rank that only sends (a broadcast's root) learns of a disagreement by its next call.
  comm.allReduce(a.data(), b.data(), 1);
  std::fprintf(stderr, "rank %d: mismatched collective returned without an error\n", comm.rank());
  std::exit(1);
}

// Large collectives, each checked.
void loop(gyre::Comm& comm, const std::string& coll, int rounds, size_t count, int stopRank,
          int stopAfter) {
  const int rank = comm.rank(), n = comm.size();
  std::vector<float> in(count), out(count);
  const size_t block = count / size_t(n);
  for (int round = 0; round < rounds; ++round) {
    if (rank == stopRank && round == stopAfter) {
      // Stopped while "computing": its progress was published meanwhile (at most 200 ms old).
      std::fprintf(stderr, "rank %d: stopping myself before round %d\n", rank, round);
      usleep(500 * 1000);
      raise(SIGSTOP);
    }
    for (size_t i = 0; i < in.size(); ++i) in[i] = float((rank + round + i) % 7);
    const size_t stride = count > 4099 ? 4099 : 1;
    if (coll == "broadcast") {
      if (rank != 0) std::fill(in.begin(), in.end(), -1.0f);
      comm.broadcast(in.data(), in.data(), count, 0);
      for (size_t i = 0; i < count; i += stride) expect_(in[i] == float((round + i) % 7), rank);
    } else if (coll == "all_gather") {
      std::fill(out.begin(), out.end(), -1.0f);
      comm.allGather(in.data(), out.data(), block);
      for (size_t i = 0; i < block * size_t(n); i += stride) {
        expect_(out[i] == float((i / block + round + i % block) % 7), rank);
      }
    } else if (coll == "gather") {  // to rank 0
      std::fill(out.begin(), out.end(), -1.0f);
      comm.gather(in.data(), out.data(), block, 0);
      for (size_t i = 0; rank == 0 && i < block * size_t(n); i += stride) {
        expect_(out[i] == float((i / block + round + i % block) % 7), rank);
      }
    } else if (coll == "scatter") {  // from rank 0: block r of its input
      std::fill(out.begin(), out.end(), -1.0f);
      comm.scatter(in.data(), out.data(), block, 0);
      for (size_t i = 0; i < block; i += stride) {
        expect_(out[i] == float((round + size_t(rank) * block + i) % 7), rank);
      }
    } else {
      comm.allReduce(in.data(), out.data(), in.size());
      for (size_t i = 0; i < out.size(); i += stride) {
        float expect = 0;
        for (int r = 0; r < n; ++r) expect += float((r + round + i) % 7);
        expect_(out[i] == expect, rank);
      }
    }
  }
}

int main(int argc, char** argv) {
  int failRank = -1, exitCode = 3, rounds = 0, stopRank = -1, stopAfter = 0;
  size_t loopCount = size_t(1) << 20;
  bool secondComm = false, initAll = false, shrink = false;
  std::string mismatchKind, loopColl = "all_reduce";
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (!std::strcmp(argv[i], "--fail-rank") && more)
      failRank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--exit-code") && more)
      exitCode = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--loop") && more)
      rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--loop-count") && more)
      loopCount = size_t(std::atoll(argv[++i]));
    else if (!std::strcmp(argv[i], "--loop-coll") && more)
      loopColl = argv[++i];
    else if (!std::strcmp(argv[i], "--stop-rank") && more)
      stopRank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--stop-after") && more)
      stopAfter = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--mismatch") && more)
      mismatchKind = argv[++i];
    else if (!std::strcmp(argv[i], "--second-comm"))
      secondComm = true;
    else if (!std::strcmp(argv[i], "--init-all"))
      initAll = true;
    else if (!std::strcmp(argv[i], "--shrink"))
      shrink = true;
  }
  try {
    auto comm = gyre::Comm::fromEnv();
    const int rank = comm.rank(), n = comm.size();
    if (!mismatchKind.empty()) mismatch(comm, mismatchKind);
    if (rounds > 0) {
      std::fprintf(stderr, "rank %d pid %d looping\n", rank, int(getpid()));
      loop(comm, loopColl, rounds, loopCount, stopRank, stopAfter);
      if (failures) return 1;
      std::printf("loop: %d rounds correct\n", rounds);
      std::fflush(stdout);
      if (secondComm) {
        try {
          auto again = gyre::Comm::fromEnv();
          std::printf("second communicator: created\n");
        } catch (const gyre::Error& e) {
          std::printf("second communicator: %s\n", e.what());
        }
      }
      return 0;
    }
    if (rank == failRank) {
      std::fprintf(stderr, "rank %d: exiting with %d on purpose\n", rank, exitCode);
      std::_Exit(exitCode);  // no destroy: the peers see the connection drop
    }
    if (failRank >= 0) {
      std::vector<float> big(1 << 22, 1.0f);
      comm.allReduce(big.data(), big.data(), big.size());
      std::fprintf(stderr, "rank %d: all_reduce succeeded although rank %d left\n", rank, failRank);
      return 1;
    }
    float one = 1, sum = 0;
    comm.allReduce(&one, &sum, 1);
    expect(sum == float(n), "all_reduce of ones", rank);
    int64_t v = rank + 1, r = 0, fact = 1;
    for (int i = 2; i <= n; ++i) fact *= i;
    comm.allReduce(&v, &r, 1, gyreProd);
    expect(r == fact, "all_reduce prod of rank+1", rank);
    comm.allReduce(&v, &r, 1, gyreMax);
    expect(r == n, "all_reduce max of rank+1", rank);
    comm.allReduce(&v, &r, 1, gyreMin);
    expect(r == 1, "all_reduce min of rank+1", rank);
    const gyre::PreMulSum quarter(comm, 0.25);  // a premul sum: every input times 0.25
    double dv = double(rank + 1), dr = 0;
    comm.allReduce(&dv, &dr, 1, quarter.op());
    expect(dr == 0.125 * n * (n + 1), "all_reduce premul sum of rank+1 by 0.25", rank);
    int32_t mine = rank;
    std::vector<int32_t> all(n, -1);
    comm.allGather(&mine, all.data(), 1);
    for (int i = 0; i < n; ++i) expect(all[i] == i, "all_gather of ranks", rank);
    std::vector<double> ones(n, 1.0);
    double part = 0;
    comm.reduceScatter(ones.data(), &part, 1);
    expect(part == n, "reduce_scatter of ones", rank);
    double value = rank == 0 ? 42.5 : -1.0;
    comm.broadcast(&value, &value, 1, 0);
    expect(value == 42.5, "broadcast from rank 0", rank);
    if (shrink && rank < n - 1) {  // every rank but the last, in a communicator of their own
      auto rest = comm.shrink({n - 1});
      int one = 1, count = 0;
      rest.allReduce(&one, &count, 1);
      expect(count == n - 1 && rest.size() == n - 1, "shrink: an all_reduce without the last rank",
             rank);
    }
    if (rank == 0 && initAll) {
      // A job of its own held whole by this process, driven from this thread.
      auto local = gyre::Comm::initAll(3);
      std::vector<int32_t> in{1, 2, 3}, out(3, -1);
      gyre::Group group;
      for (int r = 0; r < 3; ++r) local[size_t(r)].allReduce(&in[size_t(r)], &out[size_t(r)], 1);
      group.end();
      for (int r = 0; r < 3; ++r)
        expect(out[size_t(r)] == 6, "initAll: a grouped all_reduce", rank);
    }
    if (rank == 0)
      std::printf("walkthrough: %d ranks, %s\n", n, failures ? "FAILED" : "all correct");
  } catch (const gyre::Error& e) {
    std::fprintf(stderr, "walkthrough: %s\n", e.what());
    return 2;
  }
  return failures ? 1 : 0;
}
