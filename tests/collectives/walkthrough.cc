// The classic torch.distributed walkthrough on gyre's C++ API, one process per rank (run it
// under gyre-run). With --fail-rank R, rank R exits with --exit-code right after init while
// the others start a large all-reduce: they must fail with an error naming rank R.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gyre/gyre.hpp"

namespace {
int failures = 0;
void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: WRONG: %s\n", rank, what.c_str());
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) {
  int failRank = -1, exitCode = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fail-rank")) failRank = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--exit-code")) exitCode = std::atoi(argv[i + 1]);
  }
  try {
    auto comm = gyre::Comm::fromEnv();
    const int rank = comm.rank(), n = comm.size();
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
    if (rank == 0) std::printf("walkthrough: %d ranks, %s\n", n, failures ? "FAILED" : "all correct");
  } catch (const gyre::Error& e) {
    std::fprintf(stderr, "walkthrough: %s\n", e.what());
    return 2;
  }
  return failures ? 1 : 0;
}
